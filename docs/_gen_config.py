"""The configuration reference, generated from the option tables in the code.

:func:`option_tables` reads :func:`kontrakt._config.option_tables` -- the declarations the
clients, the registry client, the serdes and Spark parse their configuration with -- so the
page lists exactly what the code accepts, with the docs, defaults and bounds it enforces.
"""

from __future__ import annotations

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


_SECURITY = ("security.", "ssl.", "sasl.", "enable.sasl.", "oauth_cb")


def _rows(rows: Iterable[Mapping[str, Any]], skip: Iterable[str] = ()) -> tuple[OptionRow, ...]:
    left_out = set(skip)
    return tuple(
        OptionRow(r["name"], r["type"], r["default"], r["doc"],
                  tuple(r["choices"]) if r["choices"] else None, r["minimum"], r["secret"])
        for r in rows if r["name"] not in left_out)


def option_tables() -> list[OptionTable]:
    """Every option table of the code, from :func:`kontrakt._config.option_tables` (the
    one declaration every client, the registry client, the serdes and Spark parse with),
    under the titles and introductions of the reference."""
    from kontrakt._config import option_tables as declared

    found = declared()
    client = found.pop("client")
    shared = {r["name"] for r in client}
    security = [r for r in client if r["name"].startswith(_SECURITY)]
    tables = [
        OptionTable("Every Kafka client", "Taken by `Producer`, `Consumer`, `ShareConsumer`, "
                    "`AdminClient`, `KafkaClient`, their `Async` forms and the serializing "
                    "clients.",
                    _rows(r for r in client if r not in security)),
        OptionTable("Security (every Kafka client)", "TLS and SASL; see "
                    "[Security](../security.md). Secret values never appear in `repr`, "
                    "errors or logs.", _rows(security)),
        OptionTable("Producer", "`Producer`, `AsyncProducer` and the serializing producers, "
                    "besides the options above.", _rows(found.pop("producer"), shared)),
        OptionTable("Consumer", "`Consumer`, `AsyncConsumer` and the deserializing "
                    "consumers, besides the options above.", _rows(found.pop("consumer"), shared)),
        OptionTable("Share consumer", "`ShareConsumer` and `AsyncShareConsumer` (share "
                    "groups, KIP-932), besides the options of every Kafka client.",
                    _rows(found.pop("share consumer"), shared)),
        OptionTable("Admin client", "`AdminClient` and `AsyncAdminClient`, besides the "
                    "options of every Kafka client.", _rows(found.pop("admin"), shared)),
        OptionTable("Schema Registry client", "`SchemaRegistryClient` and its async form "
                    "(confluent-kafka's names).", _rows(found.pop("schema registry client"))),
        OptionTable("Serializers (registry formats)",
                    "Every Avro, JSON Schema and Protobuf serializer.",
                    _rows(found.pop("serializer"))),
        OptionTable("Deserializers (registry formats)",
                    "Every Avro, JSON Schema and Protobuf deserializer.",
                    _rows(found.pop("deserializer"))),
    ]
    spark = found.pop("spark", [])
    for component, rows in found.items():  # "<format> serializer" / "<format> deserializer"
        fmt, _, role = component.partition(" ")
        name = {"avro": "Avro", "json": "JSON", "protobuf": "Protobuf"}.get(fmt, fmt)
        klass = f"{name}{role.capitalize()}"
        tables.append(OptionTable(f"{klass} (besides the above)",
                                  f"Only `{klass}` and its async form.", _rows(rows)))
    tables.append(OptionTable(
        "Spark data source", "Options of `spark.read/readStream/write.format(\"kontrakt\")`, "
        "compared case-insensitively (as Spark does); `kafka.*` options go to the Kafka "
        "clients with the prefix removed. Meanings: see [Spark pipelines](../spark.md).",
        _rows(spark)))
    return tables


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
