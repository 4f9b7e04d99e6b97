"""Writes with value.format=json to a subject that has no schema: the JSON Schema derived
from the column's Spark type, first without a JVM (it maps back to the same type, nullability
aside; jsonschema accepts what the writer makes of sample rows; what would read back as
another type is refused with its path), then through Spark against Tansu and the embedded
registry, the records checked with confluent-kafka's JSONDeserializer."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from jsonschema import Draft7Validator
from pyspark.sql import Row
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
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kontrakt.errors import ConfigError
from kontrakt.registry import SchemaRegistryClient
from kontrakt.spark._fieldplan import type_shape
from kontrakt.spark._json_derive import DRAFT_07, derive_json_schema
from kontrakt.spark._json_types import json_mapping, json_writer
from kontrakt.testing import TansuBroker
from tests.spark.helpers import (
    assert_nothing_written,
    confluent_read,
    consume_raw,
    struct_of,
    write,
)

POINT = struct_of(("lat", DoubleType(), False), ("lon", DoubleType(), True))
LINE = struct_of(("sku", StringType(), False), ("qty", LongType(), True))
# The written column of the Spark-level tests: every supported kind, nullable or not.
ORDER = struct_of(
    ("id", LongType(), False),
    ("name", StringType(), True),
    ("ok", BooleanType(), True),
    ("ratio", DoubleType(), True),
    ("lines", ArrayType(LINE, False), False),
    ("tags", ArrayType(StringType(), True), True),
    ("attrs", MapType(StringType(), LongType(), True), True),
    ("where", struct_of(("city", StringType(), True), ("geo", POINT, True)), True),
)

SUPPORTED = [
    StringType(), LongType(), DoubleType(), BooleanType(), NullType(),
    ArrayType(LongType(), True), ArrayType(LongType(), False),
    ArrayType(ArrayType(StringType(), True), False),
    ArrayType(LINE, True),
    MapType(StringType(), DoubleType(), False),
    MapType(StringType(), MapType(StringType(), LINE, True), True),
    MapType(StringType(), ArrayType(BooleanType(), True), False),
    POINT,
    ORDER,
    struct_of(("void", NullType(), False)),  # always null, so never required
    # JSON property names are any strings; the same name at several depths
    struct_of(("x-y", StringType(), False), ("with space", LongType(), True),
            ("a", struct_of(("a", struct_of(("a", LongType(), False)), True)), False)),
]


@pytest.mark.parametrize("data_type", SUPPORTED, ids=lambda t: t.simpleString())
def test_derived_schema_reads_back_as_the_same_type(data_type: DataType) -> None:
    schema = derive_json_schema(data_type)
    Draft7Validator.check_schema(schema)
    assert schema["$schema"] == DRAFT_07
    # nullability aside, as the writer compares a column with its subject's schema
    assert type_shape(json_mapping(json.dumps(schema)).data_type) == type_shape(data_type)


def _sample(data_type: DataType, nulls: bool) -> Any:
    """A Spark row value of ``data_type``: with ``nulls``, null wherever the type allows."""
    if isinstance(data_type, StringType):
        return "text ü"
    if isinstance(data_type, LongType):
        return 2**53 + 1  # beyond a double: must stay an integer
    if isinstance(data_type, DoubleType):
        return 2.0 if nulls else -0.125  # 2.0: JSON integer-looking, still a number
    if isinstance(data_type, BooleanType):
        return nulls
    if isinstance(data_type, NullType):
        return None
    if isinstance(data_type, ArrayType):
        items = [_sample(data_type.elementType, nulls), _sample(data_type.elementType, False)]
        return [*items, None] if nulls and data_type.containsNull else items
    if isinstance(data_type, MapType):
        entries = {"k": _sample(data_type.valueType, nulls)}
        if nulls and data_type.valueContainsNull:
            entries["gone"] = None
        return entries
    assert isinstance(data_type, StructType)
    return Row(**{f.name: None if nulls and f.nullable else _sample(f.dataType, nulls)
                  for f in data_type.fields})


@pytest.mark.parametrize("nulls", [False, True], ids=["full", "nulls"])
@pytest.mark.parametrize("data_type", SUPPORTED, ids=lambda t: t.simpleString())
def test_written_documents_validate_and_read_back(data_type: DataType, nulls: bool) -> None:
    schema = derive_json_schema(data_type)
    value = _sample(data_type, nulls)
    doc = json.loads(json.dumps(json_writer(schema)(value)))
    errors = [e.message for e in Draft7Validator(schema).iter_errors(doc)]
    assert errors == []
    convert = json_mapping(schema).convert
    # Row is a tuple, so a struct read back (a tuple) compares with the sample row
    assert (doc if convert is None else convert(doc)) == value


def test_derived_schema_shape() -> None:
    schema = derive_json_schema(ORDER)
    assert list(schema) == ["$schema", "type", "properties", "required"]
    props = schema["properties"]
    assert list(props) == ORDER.fieldNames()
    assert schema["required"] == ["id", "lines"]
    assert props["id"] == {"type": "integer"}
    assert props["name"] == {"type": ["string", "null"]}
    assert props["ratio"] == {"type": ["number", "null"]}
    assert props["lines"] == {"type": "array", "items": {
        "type": "object", "properties": {"sku": {"type": "string"},
                                         "qty": {"type": ["integer", "null"]}},
        "required": ["sku"]}}
    assert props["tags"] == {"type": ["array", "null"],
                             "items": {"type": ["string", "null"]}}
    assert props["attrs"] == {"type": ["object", "null"],
                              "additionalProperties": {"type": ["integer", "null"]}}
    # the column itself is never nullable: a null value is a tombstone, not JSON null
    assert derive_json_schema(StringType(), "key") == {"$schema": DRAFT_07, "type": "string"}


def test_required_and_null_are_enforced() -> None:
    """The derived schema says what the column allows, so a document that breaks the
    column's nullability is refused rather than written."""
    validator = Draft7Validator(derive_json_schema(ORDER))
    assert not validator.is_valid({"lines": []})  # id missing
    assert not validator.is_valid({"id": 1, "lines": [None]})  # lines cannot hold null
    assert not validator.is_valid({"id": 1.5, "lines": []})  # bigint
    assert validator.is_valid({"id": 1, "lines": [], "tags": [None], "attrs": {"a": None}})


@pytest.mark.parametrize(("data_type", "message"), [
    (IntegerType(), r"^value: int would be written as JSON integer and read back as "
                    r"bigint; cast it to bigint"),
    (struct_of(("s", ShortType(), True)), r"^value\.s: smallint .* cast it to bigint"),
    (ArrayType(ByteType()), r"^value\[\]: tinyint"),
    (struct_of(("f", FloatType(), False)), r"^value\.f: float .* read back as double"),
    (struct_of(("p", DecimalType(9, 2), True)), r"^value\.p: decimal\(9,2\) has no JSON "
                                              r"Schema type"),
    (MapType(StringType(), DateType()), r"^value\{\}: date has no JSON Schema type"),
    (struct_of(("at", TimestampType(), True)), r"^value\.at: timestamp has no JSON"),
    (struct_of(("at", TimestampNTZType(), True)), r"^value\.at: timestamp_ntz has no JSON"),
    (struct_of(("b", BinaryType(), True)), r"^value\.b: binary .* base64"),
    (MapType(IntegerType(), StringType()), r"^value: map<int,string> has no JSON Schema "
                                           r"type \(JSON object keys are strings\)"),
    (struct_of(("a", ArrayType(struct_of(("m", MapType(LongType(), LongType()), True))), True)),
     r"^value\.a\[\]\.m: map<bigint,bigint>"),
    (struct_of(("i", DayTimeIntervalType(), True)),
     r"^value\.i: Spark type interval day to second has no JSON Schema equivalent"),
    (CalendarIntervalType(), r"^value: Spark type interval has no JSON Schema"),
    (struct_of(("s", StringType("UTF8_LCASE"), True)),
     r"^value\.s: string collate UTF8_LCASE would read back as string"),
    (MapType(StringType("UTF8_LCASE"), LongType()), r"^value: map<string collate UTF8_LCASE"
                                                   r",bigint> would read back"),
    (struct_of(("e", struct_of(), True)), r"^value\.e: struct<> .* would read back as a map"),
    (struct_of(("s", LongType(), True), ("s", StringType(), True)),
     r"^value\.s: the struct has two fields"),
])
def test_types_without_json_equivalent_name_their_path(data_type: DataType,
                                                       message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        derive_json_schema(data_type)


# --- through Spark -------------------------------------------------------------------

ROWS: list[tuple[Any, ...]] = [
    ("k0", (1, "first", True, 0.5, [("a", 2), ("b", None)], ["x", None],
            {"x": 1, "y": None}, ("Oslo", (59.9, None)))),
    ("k1", (2**53 + 1, None, None, None, [], None, None, None)),
    ("k2", None),  # a tombstone: a null value is a null record value, not JSON null
]


def _document(data_type: DataType, value: Any) -> Any:
    """What confluent's JSONDeserializer gives for a Spark value: null struct fields are
    left out of the document."""
    if value is None:
        return None
    if isinstance(data_type, StructType):
        return {f.name: _document(f.dataType, v)
                for f, v in zip(data_type.fields, value, strict=True) if v is not None}
    if isinstance(data_type, ArrayType):
        return [_document(data_type.elementType, v) for v in value]
    if isinstance(data_type, MapType):
        return {k: _document(data_type.valueType, v) for k, v in value.items()}
    return value


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_write_registers_the_derived_schema_once(spark: Any, tansu_broker: TansuBroker,
                                                 registry_url: str,
                                                 client: SchemaRegistryClient,
                                                 topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    subject = f"{topic_name}-value"
    write(spark, tansu_broker, registry_url, topic_name, "json", ROWS, ORDER)

    assert len(client.get_versions(subject)) == 1
    latest = client.get_latest_version(subject)
    assert latest.schema.schema_type == "JSON"
    assert json.loads(latest.schema.schema_str) == derive_json_schema(ORDER)
    records = consume_raw(tansu_broker, topic_name, len(ROWS))
    assert [r.key for r in records] == [b"k0", b"k1", b"k2"]
    for r in records[:2]:
        assert r.value[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
    docs = confluent_read(registry_url, topic_name, [r.value for r in records])
    assert docs == [_document(ORDER, v) for _, v in ROWS]
    # and a read of the subject gives the rows back as they were written
    convert = json_mapping(latest.schema.schema_str).convert
    assert convert is not None
    assert [convert(d) for d in docs] == [v for _, v in ROWS]

    # The subject exists now: the second write checks the column against it and reuses it.
    write(spark, tansu_broker, registry_url, topic_name, "json", ROWS[:1], ORDER)
    again = consume_raw(tansu_broker, topic_name, len(ROWS) + 1)[-1]
    assert again.value[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
    assert client.get_versions(subject) == [latest.version]


@pytest.mark.integration
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("value_type", "options", "message"), [
    (ORDER, {"auto.register.schemas": "false"},
     r"ConfigError: value.format=json needs a schema under subject '.*-value'.*"
     r"auto.register.schemas is false"),
    (struct_of(("n", IntegerType(), True)), {},
     r"ConfigError: value\.n: int would be written as JSON integer"),
])
def test_no_schema_is_derived_and_nothing_produced(spark: Any, tansu_broker: TansuBroker,
                                                   registry_url: str,
                                                   client: SchemaRegistryClient,
                                                   topic_name: str, value_type: DataType,
                                                   options: dict[str, str],
                                                   message: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    with pytest.raises(Exception, match=message):
        write(spark, tansu_broker, registry_url, topic_name, "json", [("k", None)],
              value_type, **options)
    assert_nothing_written(client, tansu_broker, topic_name)
