"""Protobuf's ``Timestamp`` and ``Duration`` through the ``kontrakt`` data source, against a
real broker (Tansu) and the embedded registry: TimestampType and DayTimeIntervalType columns
written as protobuf are checked with confluent-kafka's ProtobufDeserializer, and records from
confluent-kafka's ProtobufSerializer are read into such columns.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from kontrakt.clients.producer import Producer
from kontrakt.registry import Schema, SchemaRegistryClient
from kontrakt.testing import TansuBroker
from tests.spark.helpers import confluent_read, consume_raw
from tests.spark.test_spark import _reader, _write_registered
from tests.spark.test_spark_mapping import _proto_descriptor

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

LAP = """
syntax = "proto3";
package track;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
message Lap {
  string name = 1;
  google.protobuf.Timestamp at = 2;
  google.protobuf.Duration took = 3;
  repeated google.protobuf.Timestamp marks = 4;
}
"""
LAP_SPARK = "struct<name:string,at:timestamp,took:interval day to second,marks:array<timestamp>>"
UTC = datetime.timezone.utc


def test_write_timestamp_and_interval_columns_as_protobuf(
        spark: Any, tansu_broker: TansuBroker, registry_url: str, topic_name: str) -> None:
    from google.protobuf.message_factory import GetMessageClass

    at = datetime.datetime(2024, 2, 29, 12, 30, 1, 123_456, tzinfo=UTC)
    took = -datetime.timedelta(days=1, seconds=5, microseconds=7)
    before_1970 = datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
    rows = [("k0", ("a", at, took, [before_1970, at])), ("k1", ("b", None, None, []))]
    with SchemaRegistryClient({"url": registry_url}) as client:
        _write_registered(spark, tansu_broker, client, registry_url, topic_name,
                          Schema(LAP, "PROTOBUF"), rows, LAP_SPARK)

    # (test_spark.py checks the Confluent framing; confluent's deserializer relies on it)
    records = consume_raw(tansu_broker, topic_name, 2)
    assert [r.key for r in records] == [b"k0", b"k1"]
    first, second = confluent_read(registry_url, topic_name, [r.value for r in records],
                                   "protobuf", GetMessageClass(_proto_descriptor(LAP)))
    assert (first.at.seconds, first.at.nanos) == (1_709_209_801, 123_456_000)
    # a negative Duration: seconds and nanos share the sign
    assert (first.took.seconds, first.took.nanos) == (-86_405, -7_000)
    assert [(m.seconds, m.nanos) for m in first.marks] == [(-1, 999_999_000),
                                                           (1_709_209_801, 123_456_000)]
    # protobuf's own conversions give back the column values
    assert first.at.ToDatetime(UTC) == at and first.took.ToTimedelta() == took
    assert not second.HasField("at") and not second.HasField("took") and not second.marks


def test_read_confluent_protobuf_timestamps_as_timestamp_columns(
        spark: Any, tansu_broker: TansuBroker, registry_url: str, topic_name: str) -> None:
    import warnings

    from google.protobuf.message_factory import GetMessageClass

    with warnings.catch_warnings():
        # authlib, which confluent's registry client loads, warns about its httpx support
        # (see confluent_read in tests/spark/helpers.py).
        import authlib.deprecate  # noqa: F401

        warnings.simplefilter("ignore")
        from confluent_kafka.schema_registry import SchemaRegistryClient as CClient
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CProto
        from confluent_kafka.serialization import MessageField as CField
        from confluent_kafka.serialization import SerializationContext as CContext

    lap = GetMessageClass(_proto_descriptor(LAP))
    first = lap(name="a")
    first.at.seconds, first.at.nanos = 1_700_000_000, 123_456_789  # nanos truncated
    first.took.seconds, first.took.nanos = -90, -250_000_999  # towards zero
    first.marks.add(seconds=-1, nanos=999_999_999)
    messages = [first, lap(name="b")]
    tansu_broker.create_topic(topic_name, 1)
    ctx = CContext(topic_name, CField.VALUE)
    with CClient({"url": registry_url}) as cclient, \
            Producer({"bootstrap.servers": tansu_broker.bootstrap_servers}) as producer:
        serialize = CProto(lap, cclient, {"use.deprecated.format": False})
        for msg in messages:
            producer.send(topic_name, serialize(msg, ctx))
            producer.flush(10)  # one record per batch: see the Tansu note in test_spark.py

    df = _reader(spark, tansu_broker, registry_url, topic_name,
                 value_format="protobuf").load()
    assert df.schema["value"].dataType.simpleString() == LAP_SPARK
    # micros since the epoch, so the check does not depend on the driver's local time zone
    rows = df.orderBy("offset").selectExpr(
        "value.name", "unix_micros(value.at) AS at", "value.took",
        "transform(value.marks, m -> unix_micros(m)) AS marks").collect()
    assert [tuple(r) for r in rows] == [
        ("a", 1_700_000_000_123_456, -datetime.timedelta(seconds=90, microseconds=250_000),
         [-1]),
        ("b", None, None, [])]
