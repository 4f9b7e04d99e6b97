"""Subject name strategies: which registry subject a record's schema lives under.

A strategy is any callable ``(ctx, record_name) -> str | None``; the three standard ones
follow Confluent's naming. Reference strategies name the subject of a Protobuf import:
``(ctx, schema_reference) -> str``, where the reference has a ``.name`` (the import path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kontrakt.errors import SerializationError
from kontrakt.serde._context import SerializationContext

__all__ = [
    "ReferenceSubjectNameStrategy",
    "SubjectNameStrategy",
    "record_subject_name_strategy",
    "reference_subject_name_strategy",
    "topic_record_subject_name_strategy",
    "topic_subject_name_strategy",
]

#: ``(ctx, record_name) -> subject`` (``None``: no registry lookup for this record).
SubjectNameStrategy = Callable[[SerializationContext | None, str | None],
                               str | None]
#: ``(ctx, reference) -> subject`` for a schema reference (a Protobuf import).
ReferenceSubjectNameStrategy = Callable[[SerializationContext | None, Any], str | None]


def topic_subject_name_strategy(ctx: SerializationContext | None,
                                record_name: str | None) -> str | None:
    """``{topic}-key`` or ``{topic}-value`` (the default).

    Raises:
        SerializationError: no context (the topic is needed).
    """
    if ctx is None:
        raise SerializationError("topic_subject_name_strategy needs a SerializationContext")
    # MessageField is a str enum, so plain concatenation gives "-key"/"-value" without
    # going through Enum.value (a descriptor call) on the hot path.
    return ctx.topic + "-" + ctx.field


def topic_record_subject_name_strategy(ctx: SerializationContext | None,
                                       record_name: str | None) -> str | None:
    """``{topic}-{fully qualified record name}``.

    Raises:
        SerializationError: no context (the topic is needed).
    """
    if ctx is None:
        raise SerializationError("topic_record_subject_name_strategy needs a SerializationContext")
    return f"{ctx.topic}-{record_name}" if record_name is not None else None


def record_subject_name_strategy(ctx: SerializationContext | None,
                                 record_name: str | None) -> str | None:
    """``{fully qualified record name}``; the topic plays no part."""
    return record_name


def reference_subject_name_strategy(
    ctx: SerializationContext | None, schema_ref: Any
) -> str | None:
    """A Protobuf import is registered under its file name (e.g. ``common/money.proto``)."""
    return None if schema_ref is None else str(schema_ref.name)
