"""What the three registry formats' Spark mappings share: a schema node's Spark type with
its value converter (:class:`ColumnMapping`), the error for a construct without a Spark type,
and the reading of PySpark's naive timestamps.

Each format maps its schemas with it: Avro in :mod:`kontrakt.spark._types`, JSON Schema in
:mod:`kontrakt.spark._json_types`, Protobuf in :mod:`kontrakt.spark._proto_types`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import DataType

from kontrakt.errors import ConfigError

__all__ = ["ColumnMapping", "Convert", "UnsupportedSchemaError", "aware_utc"]

Convert = Callable[[Any], Any]
"""Turns one decoded value into the value Spark expects for the mapped type (or back)."""


class UnsupportedSchemaError(ConfigError):
    """A registered schema uses a construct that has no Spark type (a recursive record, a
    decimal wider than 38 digits, a malformed schema). Raised when the DataFrame's schema is
    derived, before any record is read.

    Attributes:
        path: where in the schema the construct is (``value.address.next``).
    """

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{message} (at {path})" if path else message)
        self.path = path


@dataclass(frozen=True)
class ColumnMapping:
    """A schema node's Spark type and the converter for its decoded values.

    Attributes:
        data_type: the Spark type.
        nullable: True when the schema admits null (an Avro union with ``null``, a JSON
            type list with ``null``, a Protobuf field with presence).
        convert: decoded value -> Spark value; ``None`` when values pass unchanged.
    """

    data_type: DataType
    nullable: bool
    convert: Convert | None


def aware_utc(value: Any) -> Any:
    """``value`` as an aware datetime: a naive one is read in the local time zone.

    PySpark hands TimestampType values to Python as naive datetimes in the worker's local
    time zone; ``astimezone()`` reads a naive datetime the same way. Other values pass."""
    if isinstance(value, datetime.datetime) and value.tzinfo is None:
        return value.astimezone(datetime.timezone.utc)
    return value
