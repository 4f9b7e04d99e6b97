"""The data source's options, checked once on the driver before any work starts.

Names follow Spark's built-in Kafka source where it has one (``kafka.bootstrap.servers``,
``subscribe``, ``startingOffsets``, ``endingOffsets``, ``maxOffsetsPerTrigger``,
``kafkaConsumer.pollTimeoutMs``, ``failOnDataLoss``, ``topic``); the registry and format
options are Kontrakt's.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from kontrakt.errors import ConfigError

__all__ = [
    "AVRO_NAME", "DEFAULT_RECORD_NAME", "EARLIEST", "FORMATS", "LATEST", "REGISTRY_FORMATS",
    "OffsetSpec", "SourceOptions", "parse_options",
]

EARLIEST = -2
"""In an offsets JSON, the partition's earliest offset (as in Spark's Kafka source)."""
LATEST = -1
"""In an offsets JSON, the partition's end offset."""

Format = Literal["avro", "json", "protobuf", "string", "binary"]
FORMATS: tuple[Format, ...] = ("avro", "json", "protobuf", "string", "binary")
REGISTRY_FORMATS: frozenset[str] = frozenset({"avro", "json", "protobuf"})
"""The formats encoded and decoded with a registry schema."""
OffsetSpec = Literal["earliest", "latest"] | dict[str, dict[int, int]]
"""``"earliest"``, ``"latest"``, or per topic and partition an offset (or -2 / -1)."""

_KNOWN = {
    "subscribe", "topic", "startingoffsets", "endingoffsets", "maxoffsetspertrigger",
    "kafkaconsumer.polltimeoutms", "key.format", "value.format", "key.subject",
    "value.subject", "includeheaders", "failondataloss", "auto.register.schemas",
    "key.avro.recordname", "key.avro.namespace", "value.avro.recordname",
    "value.avro.namespace",
    # Spark's own, handed to the source along with the user's options
    "path", "checkpointlocation",
}
# Set by the source itself (Spark's Kafka source refuses them too): a group would commit
# offsets the query does not own, and the decoding is the data source's job.
_FORBIDDEN_KAFKA = {
    "group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
    "value.deserializer", "key.serializer", "value.serializer",
}
_DEFAULT_POLL_TIMEOUT_MS = 120_000
# Spark's own defaults for the record it derives (its Avro options recordName and
# recordNamespace), so that a schema registered here looks like one to_avro would write.
DEFAULT_RECORD_NAME = "topLevelRecord"
AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What the Avro specification allows as a record or field name (and a namespace part)."""


@dataclass(frozen=True)
class SourceOptions:
    """Validated options (picklable: they travel to the executors).

    Attributes:
        kafka: Kafka client properties (``kafka.`` prefix removed), with ``bootstrap.servers``.
        registry: Schema Registry client properties (``schema.registry.`` prefix removed,
            so ``url`` and e.g. ``basic.auth.user.info``); empty without a registry.
        topics: topics to read (``subscribe``) or the topic to write (``topic``).
        starting, ending: the offset specs.
        key_format, value_format: how keys and values are decoded / encoded.
        key_subject, value_subject: registry subjects; default ``<topic>-key`` / ``-value``.
        poll_timeout_s: a task fails when a partition yields nothing for this long.
        max_offsets_per_trigger: streaming: at most this many offsets per micro-batch.
        serializer: options passed to the registry serializers when writing
            (``use.latest.version``, ``normalize.schemas``).
        auto_register: ``auto.register.schemas`` (default true): a write to an avro
            or json subject that has no schema registers one derived from the column's
            type.
        key_record, value_record: the (name, namespace) of a derived schema's top record:
            ``key.avro.recordName`` / ``key.avro.namespace`` (and ``value.``); default
            ``topLevelRecord`` and no namespace, as Spark's ``to_avro``.
        fail_on_data_loss: ``failOnDataLoss`` (default true): fail when offsets to read were
            deleted (retention, DeleteRecords); false skips them with a logged warning.
    """

    kafka: dict[str, str]
    registry: dict[str, str]
    topics: tuple[str, ...]
    starting: OffsetSpec = "earliest"
    ending: OffsetSpec = "latest"
    key_format: Format = "binary"
    value_format: Format = "binary"
    key_subject: str | None = None
    value_subject: str | None = None
    poll_timeout_s: float = _DEFAULT_POLL_TIMEOUT_MS / 1000
    max_offsets_per_trigger: int | None = None
    serializer: dict[str, str] = field(default_factory=dict)
    fail_on_data_loss: bool = True
    auto_register: bool = True
    key_record: tuple[str, str] = (DEFAULT_RECORD_NAME, "")
    value_record: tuple[str, str] = (DEFAULT_RECORD_NAME, "")

    def subject(self, is_key: bool, topic: str) -> str:
        """The registry subject of a topic's keys or values (TopicNameStrategy default)."""
        given = self.key_subject if is_key else self.value_subject
        return given or f"{topic}-{'key' if is_key else 'value'}"

    def consumer_config(self) -> dict[str, str | bool]:
        """The Kafka consumer properties: no group, no auto commit, raw bytes."""
        return {**self.kafka, "enable.auto.commit": False}


def parse_options(options: Mapping[str, str], *, write: bool = False,
                  streaming: bool = False) -> SourceOptions:
    """Check and parse the options given to ``spark.read`` / ``readStream`` / ``write``.

    Args:
        options: the case-insensitive options Spark hands the data source.
        write: parse the options of a write (``topic`` instead of ``subscribe``).
        streaming: a streaming read (``endingOffsets`` is not allowed there).

    Raises:
        ConfigError: a missing or unknown option, or a bad value.
    """
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    kafka: dict[str, str] = {}
    registry: dict[str, str] = {}
    serializer: dict[str, str] = {}
    for key, value in opts.items():
        if key.startswith("kafka."):
            name = key[len("kafka."):]
            if name in _FORBIDDEN_KAFKA:
                raise ConfigError(f"option {key!r} is not supported: the kontrakt source "
                                  f"manages {name} itself")
            kafka[name] = value
        elif key.startswith("schema.registry."):
            registry[key[len("schema.registry."):]] = value
        elif key in ("use.latest.version", "normalize.schemas"):
            serializer[key] = value
        elif key not in _KNOWN:
            close = difflib.get_close_matches(key, sorted(_KNOWN), n=2)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ConfigError(f"unknown option {key!r} for the kontrakt data source{hint}")
    if opts.get("includeheaders", "true").strip().lower() != "true":
        raise ConfigError("option 'includeHeaders' can only be true: the headers column is "
                          "always there")
    isolation = kafka.get("isolation.level")
    if isolation is not None:
        # Checked here so the error comes while the query is analysed, in Spark's words.
        kafka["isolation.level"] = isolation.strip().lower()
        if kafka["isolation.level"] not in ("read_committed", "read_uncommitted"):
            raise ConfigError(f"option 'kafka.isolation.level' must be read_committed or "
                              f"read_uncommitted; got {isolation!r}")
    if not kafka.get("bootstrap.servers", "").strip():
        raise ConfigError("option 'kafka.bootstrap.servers' is required "
                          "(host:port[,host:port...])")
    topic_key = "topic" if write else "subscribe"
    topics = tuple(t.strip() for t in opts.get(topic_key, "").split(",") if t.strip())
    if not topics:
        raise ConfigError(f"option {topic_key!r} is required (comma-separated topics)"
                          if not write else "option 'topic' is required")
    if write and len(topics) > 1:
        raise ConfigError("option 'topic' names one topic for a write")
    key_format = _format(opts, "key.format")
    value_format = _format(opts, "value.format")
    formats = {key_format, value_format}
    if formats & REGISTRY_FORMATS and not registry.get("url"):
        raise ConfigError("option 'schema.registry.url' is required for the avro, json "
                          "and protobuf formats")
    if streaming and "endingoffsets" in opts:
        raise ConfigError("option 'endingOffsets' is for batch queries only")
    starting = parse_offsets(opts.get("startingoffsets", "earliest"), "startingOffsets",
                             topics)
    ending = parse_offsets(opts.get("endingoffsets", "latest"), "endingOffsets", topics)
    if ending == "earliest" or (isinstance(ending, dict) and any(
            o == EARLIEST for parts in ending.values() for o in parts.values())):
        raise ConfigError("endingOffsets cannot be earliest (-2)")
    return SourceOptions(
        kafka=kafka, registry=registry, topics=topics, starting=starting, ending=ending,
        key_format=key_format, value_format=value_format,
        key_subject=opts.get("key.subject"), value_subject=opts.get("value.subject"),
        poll_timeout_s=_positive_int(opts, "kafkaconsumer.polltimeoutms",
                                     _DEFAULT_POLL_TIMEOUT_MS) / 1000,
        max_offsets_per_trigger=(_positive_int(opts, "maxoffsetspertrigger", 0)
                                 if "maxoffsetspertrigger" in opts else None),
        serializer=serializer,
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        auto_register=_bool(opts, "auto.register.schemas", True),
        key_record=_record_names(opts, "key", key_format),
        value_record=_record_names(opts, "value", value_format),
    )


def _record_names(opts: Mapping[str, str], field: str, fmt: Format) -> tuple[str, str]:
    name = opts.get(f"{field}.avro.recordname")
    namespace = opts.get(f"{field}.avro.namespace")
    if (name is not None or namespace is not None) and fmt != "avro":
        raise ConfigError(f"options {field}.avro.recordName / {field}.avro.namespace are for "
                          f"{field}.format=avro, not {fmt}")
    name = DEFAULT_RECORD_NAME if name is None else name.strip()
    namespace = "" if namespace is None else namespace.strip()
    if not AVRO_NAME.fullmatch(name):
        raise ConfigError(f"option {field}.avro.recordName must be an Avro name "
                          f"([A-Za-z_][A-Za-z0-9_]*); got {name!r}")
    if namespace and not all(AVRO_NAME.fullmatch(p) for p in namespace.split(".")):
        raise ConfigError(f"option {field}.avro.namespace must be Avro names joined by "
                          f"dots; got {namespace!r}")
    return name, namespace


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"option {key!r} must be true or false; got {raw!r}")
    return value == "true"


def _format(opts: Mapping[str, str], key: str) -> Format:
    value = opts.get(key, "binary").strip().lower()
    for fmt in FORMATS:
        if value == fmt:
            return fmt
    raise ConfigError(f"option {key!r} must be one of {', '.join(FORMATS)}; got {value!r}")


def _positive_int(opts: Mapping[str, str], key: str, default: int) -> int:
    raw = opts.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"option {key!r} must be a positive integer; got {raw!r}")
    return value


def parse_offsets(text: str, name: str, topics: tuple[str, ...]) -> OffsetSpec:
    """Parse ``earliest``, ``latest`` or ``{"topic": {"0": 12, "1": -2}}``.

    Partitions the JSON leaves out start at the earliest offset and end at the latest.

    Raises:
        ConfigError: not one of the forms above, or it names a topic not subscribed to.
    """
    stripped = text.strip()
    if stripped.lower() in ("earliest", "latest"):
        return "earliest" if stripped.lower() == "earliest" else "latest"
    try:
        doc = json.loads(stripped)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise ConfigError(f"{name} must be earliest, latest or JSON such as "
                          f'{{"topic": {{"0": 12}}}}; got {text!r}')
    out: dict[str, dict[int, int]] = {}
    for topic, parts in doc.items():
        if topic not in topics:
            raise ConfigError(f"{name} names topic {topic!r}, which is not subscribed to")
        if not isinstance(parts, dict):
            raise ConfigError(f"{name}: the value for topic {topic!r} must be an object "
                              f"of partition -> offset")
        mapped: dict[int, int] = {}
        for part, offset in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise ConfigError(f"{name}: partition {part!r} of {topic!r} is not a "
                                  f"number") from None
            if type(offset) is not int or offset < EARLIEST:
                raise ConfigError(f"{name}: offset {offset!r} for {topic}/{p} must be an "
                                  f"integer >= 0, or -2 (earliest) / -1 (latest)")
            mapped[p] = offset
        out[topic] = mapped
    return out
