"""Writes with value.format=avro to a subject that has no schema: the schema derived from
the column's Spark type, first without a JVM (it maps back to the same type; fastavro takes
it; what has no Avro type is refused with its path), then through Spark against Tansu and
the embedded registry, the records checked with confluent-kafka's AvroDeserializer."""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from fastavro import parse_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    CalendarIntervalType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
    YearMonthIntervalType,
)

from kontrakt.errors import ConfigError
from kontrakt.registry import SchemaRegistryClient
from kontrakt.spark._avro_derive import derive_avro_schema
from kontrakt.spark._options import parse_options
from kontrakt.spark._types import avro_mapping
from kontrakt.testing import TansuBroker
from tests.spark.helpers import (
    assert_nothing_written,
    confluent_read,
    consume_raw,
    struct_of,
    write,
)

POINT = struct_of(("lat", DoubleType(), False), ("lon", DoubleType(), True))
LINE = struct_of(("sku", StringType(), False), ("qty", IntegerType(), True))
# The written column of the Spark-level tests: every supported kind, nullable or not.
ORDER = struct_of(
    ("id", LongType(), False),
    ("name", StringType(), True),
    ("price", DecimalType(9, 2), True),
    ("day", DateType(), True),
    ("at", TimestampType(), True),
    ("local", TimestampNTZType(), True),
    ("blob", BinaryType(), True),
    ("ok", BooleanType(), True),
    ("ratio", FloatType(), True),
    ("n", IntegerType(), True),
    ("lines", ArrayType(LINE, False), False),
    ("attrs", MapType(StringType(), LongType(), True), True),
    ("where", struct_of(("city", StringType(), True), ("geo", POINT, True)), True),
)


@pytest.mark.parametrize("data_type", [
    StringType(), BinaryType(), BooleanType(), IntegerType(), LongType(), FloatType(),
    DoubleType(), DateType(), TimestampType(), TimestampNTZType(), NullType(),
    DecimalType(38, 10), DecimalType(1, 0), DecimalType(20, 20),
    ArrayType(IntegerType(), True), ArrayType(IntegerType(), False),
    ArrayType(ArrayType(StringType(), True), False),
    ArrayType(LINE, True),
    MapType(StringType(), DecimalType(5, 1), False),
    MapType(StringType(), MapType(StringType(), LINE, True), True),
    ORDER,
    struct_of(),
    struct_of(("void", NullType(), True)),  # a void field is nullable: Avro null is
    # the same field name at several depths: each nested record gets its own full name
    struct_of(("a", struct_of(("a", struct_of(("a", IntegerType(), True)), True)), False),
            ("b", ArrayType(struct_of(("a", struct_of(("x", LongType(), False)), False)), True),
             True)),
], ids=lambda t: t.simpleString())
def test_derived_schema_reads_back_as_the_same_type(data_type: DataType) -> None:
    schema = derive_avro_schema(data_type)
    named: dict[str, Any] = {}
    parse_schema(schema, named_schemas=named)  # fastavro takes it as it is
    # nullability included: only the column itself (a record key or value) is not a union
    assert avro_mapping(json.dumps(schema)).data_type == data_type


def test_record_names_follow_spark() -> None:
    schema = derive_avro_schema(ORDER)
    assert (schema["name"], "namespace" in schema) == ("topLevelRecord", False)
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["id"] == {"name": "id", "type": "long"}
    assert fields["name"] == {"name": "name", "type": ["null", "string"], "default": None}
    assert fields["price"]["type"][1] == {"type": "bytes", "logicalType": "decimal",
                                          "precision": 9, "scale": 2}
    assert fields["at"]["type"][1] == {"type": "long", "logicalType": "timestamp-micros"}
    assert fields["day"]["type"][1] == {"type": "int", "logicalType": "date"}
    line = fields["lines"]["type"]["items"]
    assert (line["name"], line["namespace"]) == ("lines", "topLevelRecord")
    geo = fields["where"]["type"][1]["fields"][1]["type"][1]
    assert (geo["name"], geo["namespace"]) == ("geo", "topLevelRecord.where")

    named = derive_avro_schema(ORDER, record_name="Order", namespace="shop.v1")
    assert (named["name"], named["namespace"]) == ("Order", "shop.v1")
    assert named["fields"][10]["type"]["items"]["namespace"] == "shop.v1.Order"


@pytest.mark.parametrize(("data_type", "message"), [
    (MapType(IntegerType(), StringType()), r"^value: map<int,string> has no Avro type"),
    (struct_of(("a", ArrayType(struct_of(("m", MapType(LongType(), LongType()), True))), True)),
     r"^value\.a\[\]\.m: map<bigint,bigint>"),
    (struct_of(("m", MapType(StringType(), DayTimeIntervalType()), True)),
     r"^value\.m\{\}: Spark type interval day to second has no Avro equivalent"),
    (struct_of(("i", YearMonthIntervalType(), True)), r"^value\.i: Spark type interval"),
    (CalendarIntervalType(), r"^value: Spark type interval has no Avro"),
    (struct_of(("b", ByteType(), True)), r"^value\.b: tinyint .* cast it to int"),
    (ShortType(), r"^value: smallint"),
    (struct_of(("s", StringType("UTF8_LCASE"), True)),
     r"^value\.s: string collate UTF8_LCASE would read back as string"),
    (struct_of(("x-y", IntegerType(), True)), r"^value\.x-y: 'x-y' is not an Avro field name"),
    (struct_of(("s", struct_of(), True), ("s", IntegerType(), True)),
     r"^value\.s: the struct has two fields"),
])
def test_types_without_avro_equivalent_name_their_path(data_type: DataType,
                                                       message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        derive_avro_schema(data_type)


def test_record_name_options() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t", "schema.registry.url": "http://r",
            "value.format": "avro"}
    opts = parse_options(base, write=True)
    assert (opts.auto_register, opts.value_record) == (True, ("topLevelRecord", ""))
    opts = parse_options({**base, "value.avro.recordName": "Order",
                          "value.avro.namespace": "shop.v1",
                          "auto.register.schemas": "false"}, write=True)
    assert (opts.auto_register, opts.value_record) == (False, ("Order", "shop.v1"))
    assert "auto.register.schemas" not in opts.serializer  # never handed to the serializer
    for bad, message in [({"value.avro.recordName": "a.b"}, "must be an Avro name"),
                         ({"value.avro.namespace": "1x"}, "Avro names joined by dots"),
                         ({"key.avro.recordName": "K"}, "are for key.format=avro, not binary"),
                         ({"auto.register.schemas": "yes"}, "must be true or false")]:
        with pytest.raises(ConfigError, match=message):
            parse_options({**base, **bad}, write=True)


@pytest.mark.parametrize("kind", ["AVRO", "JSON"])
def test_registry_refusal_and_failure_are_reported(client: SchemaRegistryClient,
                                                   topic_name: str, kind: str) -> None:
    from kontrakt.errors import SchemaRegistryError
    from kontrakt.spark._derive import register_derived
    from kontrakt.spark._json_derive import derive_json_schema

    derive = derive_avro_schema if kind == "AVRO" else derive_json_schema
    name = "Avro schema" if kind == "AVRO" else "JSON Schema"

    def register(c: SchemaRegistryClient, t: DataType, path: str) -> int:
        return register_derived(c, subject, derive(t, path), kind, t, path)

    subject = f"{topic_name}-value"
    client.update_mode(subject, "READONLY")
    with pytest.raises(ConfigError, match=rf"the registry refused registering the {name} "
                       r"derived from column 'value' \(struct<id:bigint>\) under "
                       rf"subject '{subject}'.*42205"):
        register(client, struct_of(("id", LongType(), False)), "value")

    # a port nothing listens on: no HTTP status, and not a configuration problem
    with (SchemaRegistryClient({"url": "http://127.0.0.1:9", "max.retries": 0}) as down,
          pytest.raises(SchemaRegistryError, match=f"registering the {name}") as exc):
        register(down, StringType(), "key")
    assert not isinstance(exc.value, ConfigError)


# --- through Spark -------------------------------------------------------------------

ROWS: list[tuple[Any, ...]] = [
    ("k0", (1, "first", decimal.Decimal("12.34"), datetime.date(2024, 2, 29),
            datetime.datetime(2024, 2, 29, 12, 30, 0, 123456, tzinfo=datetime.timezone.utc),
            datetime.datetime(2024, 2, 29, 1, 2, 3, 4), b"\x00\xff", True, 0.5, -7,
            [("a", 2), ("b", None)], {"x": 1, "y": None}, ("Oslo", (59.9, None)))),
    ("k1", (2, None, None, None, None, None, None, None, None, None, [], None, None)),
    ("k2", None),  # a tombstone: a null value is a null record value, not Avro null
]


def _expected(value: Any) -> Any:
    """What confluent's AvroDeserializer gives for a row's value."""
    if value is None:
        return None
    doc = dict(zip(ORDER.fieldNames(), value, strict=True))
    doc["lines"] = [{"sku": s, "qty": q} for s, q in doc["lines"]]
    if doc["where"] is not None:
        city, geo = doc["where"]
        doc["where"] = {"city": city,
                        "geo": None if geo is None else {"lat": geo[0], "lon": geo[1]}}
    return doc


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_write_registers_the_derived_schema_once(spark: Any, tansu_broker: TansuBroker,
                                                 registry_url: str,
                                                 client: SchemaRegistryClient,
                                                 topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    subject = f"{topic_name}-value"
    names = {"value.avro.recordName": "Order", "value.avro.namespace": "shop"}
    write(spark, tansu_broker, registry_url, topic_name, "avro", ROWS, ORDER, **names)

    latest = client.get_latest_version(subject)
    assert json.loads(latest.schema.schema_str) == derive_avro_schema(
        ORDER, record_name="Order", namespace="shop")
    records = consume_raw(tansu_broker, topic_name, len(ROWS))
    assert [r.key for r in records] == [b"k0", b"k1", b"k2"]
    for r in records[:2]:
        assert r.value[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
    assert confluent_read(registry_url, topic_name, [r.value for r in records],
                          "avro") == [
        _expected(v) for _, v in ROWS]

    # The subject exists now: the second write checks the column against it and reuses it.
    write(spark, tansu_broker, registry_url, topic_name, "avro", ROWS[:1], ORDER, **names)
    again = consume_raw(tansu_broker, topic_name, len(ROWS) + 1)[-1]
    assert again.value[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
    assert client.get_versions(subject) == [latest.version]


@pytest.mark.integration
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("value_type", "options", "message"), [
    (ORDER, {"auto.register.schemas": "false"},
     r"ConfigError: value.format=avro needs a schema under subject '.*-value'.*"
     r"auto.register.schemas is false"),
    (struct_of(("ids", MapType(IntegerType(), StringType()), True)), {},
     r"ConfigError: value\.ids: map<int,string> has no Avro type"),
])
def test_no_schema_is_derived_and_nothing_produced(spark: Any, tansu_broker: TansuBroker,
                                                   registry_url: str,
                                                   client: SchemaRegistryClient,
                                                   topic_name: str, value_type: DataType,
                                                   options: dict[str, str],
                                                   message: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    with pytest.raises(Exception, match=message):
        write(spark, tansu_broker, registry_url, topic_name, "avro", [("k", None)],
              value_type, **options)
    assert_nothing_written(client, tansu_broker, topic_name)
