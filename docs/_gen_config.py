"""The configuration reference, generated from the option tables in the code.

:func:`option_tables` is the ONE place that knows where the tables live today; everything
else renders what it returns, so pointing the reference at another declaration (a single
``kontrakt._config.option_tables()``, say) means rewriting that function alone.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["OptionRow", "OptionTable", "option_tables", "render_reference"]


@dataclass(frozen=True, slots=True)
class OptionRow:
    """One documented option: its name, value kind, default (None: unset) and meaning."""

    name: str
    kind: str = ""
    default: Any = None
    doc: str = ""
    choices: tuple[Any, ...] | None = None
    minimum: int | None = None
    secret: bool = False


@dataclass(frozen=True, slots=True)
class OptionTable:
    """The options one component takes, under a title, with a short introduction."""

    title: str
    intro: str
    rows: tuple[OptionRow, ...]


def _rows(opts: Mapping[str, Any], skip: Iterable[str] = ()) -> tuple[OptionRow, ...]:
    left_out = set(skip)
    return tuple(
        OptionRow(o.name, o.kind, o.default, o.doc, o.choices, o.minimum, o.secret)
        for o in opts.values() if o.name not in left_out)


def _defaults(values: Mapping[str, Any], doc: str = "") -> tuple[OptionRow, ...]:
    return tuple(OptionRow(k, "", v, doc) for k, v in values.items())


def option_tables() -> list[OptionTable]:
    """Every option table of the code, as it is declared today (the adapter).

    Kafka clients declare :class:`kontrakt._config.Option` tables; the registry client a
    tuple of key names (defaults from its settings dataclass where a field has the key's
    name); the serdes dicts of defaults per class; the Spark source a set of lower-cased
    option names.
    """
    from kontrakt._config import COMMON_OPTIONS, SECURITY_OPTIONS
    from kontrakt.clients._hooks import HOOK_OPTIONS
    from kontrakt.clients.admin._admin import ADMIN_OPTIONS
    from kontrakt.clients.client import CLIENT_OPTIONS
    from kontrakt.clients.consumer._config import CONSUMER_OPTIONS
    from kontrakt.clients.producer._config import PRODUCER_OPTIONS
    from kontrakt.registry import _config as registry_config
    from kontrakt.serde import _base as serde_base
    from kontrakt.spark import _options as spark_options

    shared = set(CLIENT_OPTIONS) | set(HOOK_OPTIONS)
    tables = [
        OptionTable("Every Kafka client", "Taken by `Producer`, `Consumer`, `AdminClient`, "
                    "`KafkaClient`, their `Async` forms and the serializing clients.",
                    _rows(COMMON_OPTIONS)),
        OptionTable("Security (every Kafka client)", "TLS and SASL; see "
                    "[Security](../security.md). Secret values never appear in `repr`, "
                    "errors or logs.", _rows(SECURITY_OPTIONS)),
        OptionTable("Callbacks and statistics (producer and consumer)",
                    "librdkafka's callbacks, run on the client's I/O thread.",
                    _rows(HOOK_OPTIONS)),
        OptionTable("Producer", "`Producer`, `AsyncProducer` and the serializing producers, "
                    "besides the options above.", _rows(PRODUCER_OPTIONS, shared)),
        OptionTable("Consumer", "`Consumer`, `AsyncConsumer` and the deserializing "
                    "consumers, besides the options above.", _rows(CONSUMER_OPTIONS, shared)),
        OptionTable("Admin client", "`AdminClient` and `AsyncAdminClient`, besides the "
                    "options of every Kafka client.", _rows(ADMIN_OPTIONS, CLIENT_OPTIONS)),
    ]
    fields = {f.name: f.default for f in dataclasses.fields(registry_config.RegistryClientConfig)
              if f.default is not dataclasses.MISSING}
    tables.append(OptionTable(
        "Schema Registry client", "`SchemaRegistryClient` and its async form "
        "(confluent-kafka's names; see the class's docstring for each).",
        tuple(OptionRow(k, "", _registry_default(k, fields)) for k in registry_config._KEYS)))
    tables.append(OptionTable(
        "Serializers (registry formats)", "Every Avro, JSON Schema and Protobuf serializer.",
        _defaults(serde_base.SERIALIZER_DEFAULTS)))
    tables.append(OptionTable(
        "Deserializers (registry formats)", "Every Avro, JSON Schema and Protobuf "
        "deserializer.", _defaults(serde_base.DESERIALIZER_DEFAULTS)))
    for module, names in (("avro", ("AvroSerializer", "AvroDeserializer")),
                          ("json_schema", ("JSONSerializer", "JSONDeserializer")),
                          ("protobuf", ("ProtobufSerializer", "ProtobufDeserializer"))):
        extras = _serde_extras(module)
        for name in names:
            extra = extras.get(name.lower())
            if extra:
                tables.append(OptionTable(f"{name} (besides the above)",
                                          f"Only `{name}` and its async form.",
                                          _defaults(extra)))
    tables.append(OptionTable(
        "Spark data source", "Options of `spark.read/readStream/write.format(\"kontrakt\")`, "
        "compared case-insensitively (as Spark does); `kafka.*` options go to the Kafka "
        "clients with the prefix removed. Meanings: see [Spark pipelines](../spark.md).",
        tuple(OptionRow(k) for k in _spark_names(spark_options))))
    return tables


def _registry_default(key: str, fields: Mapping[str, Any]) -> Any:
    """The settings field of ``key``: same name (``max.retries``), or in seconds for a
    ``.ms`` key (``connect.timeout.ms`` is ``connect_timeout``)."""
    attr = key.replace(".", "_")
    if attr in fields:
        return fields[attr]
    if key.endswith(".ms") and attr[:-3] in fields and fields[attr[:-3]] is not None:
        return round(fields[attr[:-3]] * 1000)
    return None


def _spark_names(module: Any) -> list[str]:
    """The data source's option names (kept lower-cased in the code, since Spark compares
    them case-insensitively) in the spelling the package's source or the Spark guide gives
    them (``startingOffsets``)."""
    from pathlib import Path

    package = Path(inspect.getfile(module)).parent
    guide = Path(__file__).resolve().parent / "spark.md"
    text = "\n".join(p.read_text(encoding="utf-8")
                     for p in [*sorted(package.glob("*.py")), guide] if p.is_file())
    out = []
    for name in sorted(module._KNOWN):
        spelled = {m.group(1) for m in re.finditer(
            r"[`\"'](" + re.escape(name) + r")[`\"']", text, re.IGNORECASE)} - {name}
        out.append(min(spelled) if spelled else name)  # the lower-cased _KNOWN entry left out
    return sorted(out, key=str.lower)


def _serde_extras(module: str) -> dict[str, dict[str, Any]]:
    """The defaults each serde class of ``kontrakt.serde.<module>`` adds to the common ones,
    by lower-cased class name: its core's ``extra_defaults`` (``_JsonSerializerCore`` is
    ``JSONSerializer``'s). Nothing when the format's extra is not installed."""
    import importlib

    try:
        mod = importlib.import_module(f"kontrakt.serde.{module}")
    except ImportError:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for name, klass in vars(mod).items():
        extra = klass.__dict__.get("extra_defaults") if inspect.isclass(klass) else None
        if extra and name.startswith("_") and name.endswith("Core"):
            found[name[1:-len("Core")].lower()] = dict(extra)
    return found


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if callable(value):
        return f"`{getattr(value, '__name__', repr(value))}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def _cell(text: str) -> str:
    # Brackets would read as Markdown reference links ("[lifeSeconds=3600]").
    return (text.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")
            .replace("\n", " "))


def render_reference(tables: list[OptionTable]) -> str:
    """The Markdown page of the configuration reference."""
    out = [
        "# Configuration reference",
        "",
        "Generated from the option declarations in the code when the site is built, so it",
        "lists exactly what the clients accept. Kafka clients take the property names below",
        "in their `config` mapping or the same names in snake_case as keywords",
        "(`linger.ms` or `linger_ms=`); an unknown key raises `ConfigError` naming close",
        "matches, and other clients' names (librdkafka's, the Java client's, kafka-python's,",
        "aiokafka's) are mapped or refused as the [migration guides](../migrating-from-"
        "confluent-kafka.md) say.",
        "",
    ]
    for table in tables:
        out += [f"## {table.title}", "", table.intro, "",
                "| Option | Kind | Default | Description |", "| --- | --- | --- | --- |"]
        for row in table.rows:
            doc = row.doc
            if row.choices:
                doc += (" " if doc else "") + "One of " + ", ".join(
                    f"`{c}`" for c in row.choices) + "."
            if row.minimum is not None:
                doc += (" " if doc else "") + f"At least {row.minimum}."
            if row.secret:
                doc += (" " if doc else "") + "Secret."
            out.append(f"| `{row.name}` | {row.kind} | {_shown(row.default)} | {_cell(doc)} |")
        out.append("")
    return "\n".join(out)
