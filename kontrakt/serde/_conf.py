"""The registry-bound serdes' options: one option table per role (serializer,
deserializer) plus each format's own options, parsed by :func:`parse_conf` with
confluent-kafka-python's key names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kontrakt._config import Option, OptionTable, Style, options
from kontrakt.errors import ConfigError
from kontrakt.serde._framing import dual_schema_id_deserializer, prefix_schema_id_serializer
from kontrakt.serde._strategies import topic_subject_name_strategy

__all__ = [
    "DESERIALIZER_DEFAULTS",
    "DESERIALIZER_TABLE",
    "SERDE_STYLE",
    "SERIALIZER_DEFAULTS",
    "SERIALIZER_TABLE",
    "format_tables",
    "parse_conf",
    "serde_table",
]

#: The serdes' words: ``AvroSerializer: normalize.schemas must be a bool, got 'yes'``.
SERDE_STYLE = Style(invalid="{owner}: {name} must be {expect}, got {shown}",
                    unknown="{owner}: unknown config key {key!r}{hint}")

_LATEST = (
    Option("use.latest.version", "flag", False,
           doc="use the subject's latest registered schema instead of the given one "
               "(asked for again after the registry client's cache.latest.ttl.sec)"),
    Option("use.latest.with.metadata", "mapping", None,
           doc="use the latest version whose metadata has these key/value pairs "
               "(asked for again after the registry client's cache.latest.ttl.sec)"),
    Option("subject.name.strategy", "callable", topic_subject_name_strategy,
           doc="(ctx, record_name) -> subject: where the schema is looked up"),
)

SERIALIZER_TABLE = OptionTable("serializer", options(
    Option("auto.register.schemas", "flag", True,
           doc="register the schema under the subject if it is not there yet"),
    Option("normalize.schemas", "flag", False,
           doc="normalize the schema before registering or looking it up"),
    *_LATEST,
    Option("schema.id.serializer", "callable", prefix_schema_id_serializer,
           doc="how the schema id travels: in the value's prefix (default) or a header"),
), SERDE_STYLE)

DESERIALIZER_TABLE = OptionTable("deserializer", options(
    *_LATEST,
    Option("schema.id.deserializer", "callable", dual_schema_id_deserializer,
           doc="where to find the schema id: a header, else the value's prefix"),
), SERDE_STYLE)

SERIALIZER_DEFAULTS: dict[str, Any] = {n: o.default for n, o in SERIALIZER_TABLE.options.items()}
DESERIALIZER_DEFAULTS: dict[str, Any] = {
    n: o.default for n, o in DESERIALIZER_TABLE.options.items()}


#: What the formats' own options (their cores' ``extra_defaults``, which give the
#: defaults) mean, for the configuration reference.
_FORMAT_DOCS = {
    "max.collection.items": "Avro reads: most items of one array or entries of one map",
    "max.decoded.values": "Avro reads: most values one record decodes to",
    "max.nesting.depth": "Avro reads: deepest nesting of records, arrays and maps",
    "validate": "JSON: validate each document against its schema",
    "skip.known.types": "Protobuf: do not register google/protobuf well-known imports",
    "reference.subject.name.strategy": "Protobuf: (ctx, import path) -> the subject an "
                                       "imported file is registered under",
    "use.deprecated.format": "Protobuf: message indexes without zig-zag encoding (the "
                             "pre-5.5.0 Confluent format)",
}


def _declared(name: str, default: Any) -> Option:
    """The option ``name`` as the serde tables declare it, else one inferred from its
    default (a format's own options: a bool must be a bool, a callable stays callable)."""
    for table in (SERIALIZER_TABLE, DESERIALIZER_TABLE):
        found = table.find(name)
        if found is not None:
            return found
    kind = "flag" if isinstance(default, bool) else "callable" if callable(default) else "any"
    return Option(name, kind, default, doc=_FORMAT_DOCS.get(name, ""))


def serde_table(component: str, defaults: Mapping[str, Any]) -> OptionTable:
    """The option table of a serde whose options and defaults are ``defaults``."""
    return OptionTable(component, options(*(_declared(n, d) for n, d in defaults.items())),
                       SERDE_STYLE)


def parse_conf(conf: Mapping[str, Any] | None, defaults: Mapping[str, Any],
               owner: str) -> dict[str, Any]:
    """Merge ``conf`` over ``defaults`` through the serde option table they make.

    Raises:
        ConfigError: an unknown key (naming close matches) or a value of the wrong type
            (``option`` names the key).
    """
    table = serde_table(owner, defaults)
    out = table.parse({k: v for k, v in (conf or {}).items() if v is not None}, owner)
    for key, value in (conf or {}).items():
        if value is None:
            opt = table.find(key)
            if opt is None:
                raise table.unknown(key, owner)
            if opt.kind in ("flag", "callable"):  # None is neither a bool nor a strategy
                expect = "a bool" if opt.kind == "flag" else "callable"
                raise ConfigError(SERDE_STYLE.invalid.format(
                    owner=owner, name=key, expect=expect, shown="None"), option=key)
            out[key] = None
    return out


def format_tables() -> list[OptionTable]:
    """The options each installed format's serializer and deserializer add to
    :data:`SERIALIZER_TABLE` / :data:`DESERIALIZER_TABLE`, as ``"<format> serializer"``
    tables (formats whose extra is missing are left out)."""
    import importlib

    out = []
    for fmt, module, names in (("avro", "avro", ("_AvroSerializerCore", "_AvroDeserializerCore")),
                               ("json", "json_schema", ("_JsonSerializerCore",
                                                        "_JsonDeserializerCore")),
                               ("protobuf", "protobuf", ("_ProtobufSerializerCore",
                                                         "_ProtobufDeserializerCore"))):
        try:
            mod = importlib.import_module(f"kontrakt.serde.{module}")
        except ImportError:
            continue
        for role, name in zip(("serializer", "deserializer"), names, strict=True):
            core = getattr(mod, name, None)
            extra = getattr(core, "extra_defaults", None) or {}
            if extra:
                out.append(serde_table(f"{fmt} {role}", extra))
    return out
