"""Registering a schema derived from a column's Spark type, for writes to a subject that has
no schema yet (the derivations: :mod:`kontrakt.spark._avro_derive`,
:mod:`kontrakt.spark._json_derive`)."""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.sql.types import DataType

from kontrakt.errors import ConfigError, SchemaRegistryError
from kontrakt.registry import Schema, SchemaRegistryClient

__all__ = ["register_derived"]

log = logging.getLogger("kontrakt.spark")

_KINDS = {"AVRO": "Avro schema", "JSON": "JSON Schema"}


def register_derived(client: SchemaRegistryClient, subject: str, derived: Any,
                     schema_type: str, data_type: DataType, path: str, *,
                     normalize: bool = False) -> int:
    """Register ``derived`` (a parsed schema of ``schema_type``, derived from a column of
    ``data_type``) under ``subject``, on the driver, once per write.

    The subject has no version yet, so the registry's compatibility check has nothing to
    compare with; it can still refuse the schema (a subject in read-only mode, or a
    concurrent writer that registered an incompatible schema first).

    Args:
        client: the registry client.
        subject: the subject the column is written under.
        derived: the schema, as parsed JSON.
        schema_type: ``AVRO`` or ``JSON``.
        data_type: the column's Spark type, for messages.
        path: the column (``key`` or ``value``), for messages.
        normalize: ask the registry to normalize the schema (``normalize.schemas``).

    Returns:
        The schema id.

    Raises:
        ConfigError: the registry refused the schema (HTTP 409 incompatible, 422 invalid).
        SchemaRegistryError: the registry failed otherwise (unreachable, unauthorized, ...).
    """
    try:
        schema_id = client.register_schema(subject, Schema(json.dumps(derived), schema_type),
                                           normalize_schemas=normalize)
    except SchemaRegistryError as exc:
        what = (f"registering the {_KINDS[schema_type]} derived from column {path!r} "
                f"({data_type.simpleString()}) under subject {subject!r}")
        if exc.http_status_code in (409, 422):
            raise ConfigError(f"the registry refused {what}: {exc}; register a schema "
                              f"yourself, or set {path}.subject") from exc
        raise SchemaRegistryError(exc.http_status_code, exc.error_code,
                                  f"{what} failed: {exc.error_message}") from exc
    log.info("registered the %s derived from column %r under subject %r (id %d)",
             _KINDS[schema_type], path, subject, schema_id)
    return schema_id
