"""Writes with value.format=avro to a subject that has no schema: the schema derived from
the column's Spark type, first without a JVM (it maps back to the same type; fastavro takes
it; what has no Avro type is refused with its path), then through Spark against Tansu and
the embedded registry, the records checked with confluent-kafka's AvroDeserializer."""

from __future__ import annotations

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
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    YearMonthIntervalType,
)

from kontrakt.errors import ConfigError
from kontrakt.spark._avro_derive import derive_avro_schema
from kontrakt.spark._options import parse_options
from kontrakt.spark._types import avro_mapping


def _struct(*fields: tuple[str, DataType, bool]) -> StructType:
    return StructType([StructField(n, t, nullable) for n, t, nullable in fields])


POINT = _struct(("lat", DoubleType(), False), ("lon", DoubleType(), True))
LINE = _struct(("sku", StringType(), False), ("qty", IntegerType(), True))
# The written column of the Spark-level tests: every supported kind, nullable or not.
ORDER = _struct(
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
    ("where", _struct(("city", StringType(), True), ("geo", POINT, True)), True),
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
    _struct(),
    _struct(("void", NullType(), True)),  # a void field is nullable: Avro null is
    # the same field name at several depths: each nested record gets its own full name
    _struct(("a", _struct(("a", _struct(("a", IntegerType(), True)), True)), False),
            ("b", ArrayType(_struct(("a", _struct(("x", LongType(), False)), False)), True),
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
    (_struct(("a", ArrayType(_struct(("m", MapType(LongType(), LongType()), True))), True)),
     r"^value\.a\[\]\.m: map<bigint,bigint>"),
    (_struct(("m", MapType(StringType(), DayTimeIntervalType()), True)),
     r"^value\.m\{\}: Spark type interval day to second has no Avro equivalent"),
    (_struct(("i", YearMonthIntervalType(), True)), r"^value\.i: Spark type interval"),
    (CalendarIntervalType(), r"^value: Spark type interval has no Avro"),
    (_struct(("b", ByteType(), True)), r"^value\.b: tinyint .* cast it to int"),
    (ShortType(), r"^value: smallint"),
    (_struct(("x-y", IntegerType(), True)), r"^value\.x-y: 'x-y' is not an Avro field name"),
    (_struct(("s", _struct(), True), ("s", IntegerType(), True)),
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
