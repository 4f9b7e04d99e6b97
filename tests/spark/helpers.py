"""What the Spark tests share: writing through the data source, and reading back with
kontrakt's consumer and with confluent-kafka's deserializers (the peers the written bytes
are checked with)."""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import DataType, StringType, StructField, StructType

from kontrakt.registry import SchemaRegistryClient
from kontrakt.testing import TansuBroker


def struct_of(*fields: tuple[str, DataType, bool]) -> StructType:
    """A struct type from (name, type, nullable) triples."""
    return StructType([StructField(n, t, nullable) for n, t, nullable in fields])


def write(spark: Any, broker: TansuBroker, registry_url: str, topic: str, fmt: str,
          rows: list[Any], schema: str | DataType, **options: str) -> None:
    """Write ``rows`` (key, value) in one task with key.format=string, value.format=fmt.

    ``schema`` is the DataFrame's DDL, or the value column's type (the key a nullable
    string); ``options`` are more writer options.
    """
    if isinstance(schema, DataType):
        schema = StructType([StructField("key", StringType(), True),
                             StructField("value", schema, True)])
    w = (spark.createDataFrame(rows, schema).coalesce(1).write.format("kontrakt")
         .option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("topic", topic).option("schema.registry.url", registry_url)
         .option("key.format", "string").option("value.format", fmt).mode("append"))
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def consume_raw(broker: TansuBroker, topic: str, n: int) -> list[Any]:
    """The first ``n`` records of partition 0, undecoded."""
    from kontrakt import TopicPartition
    from kontrakt.clients.consumer import Consumer

    got: list[Any] = []
    with Consumer(bootstrap_servers=broker.bootstrap_servers) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        for _ in range(100):
            got.extend(consumer.consume(n - len(got), 0.5))
            if len(got) >= n:
                break
    assert len(got) == n
    return got


def confluent_read(registry_url: str, topic: str, values: list[bytes | None],
                   fmt: str = "json", message_type: Any = None) -> list[Any]:
    """The values decoded by confluent-kafka's deserializer for ``fmt`` (avro, json, or
    protobuf with ``message_type``, the generated message class); a None value (a
    tombstone) stays None."""
    import warnings

    with warnings.catch_warnings():
        # authlib, which confluent's registry client loads, warns about its httpx support,
        # and on import puts an "always" filter for its warnings first: import it, then
        # put "ignore" in front of that.
        import authlib.deprecate  # noqa: F401

        warnings.simplefilter("ignore")
        from confluent_kafka.schema_registry import SchemaRegistryClient as CClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer as CAvro
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CJson
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CProto
        from confluent_kafka.serialization import MessageField as CField
        from confluent_kafka.serialization import SerializationContext as CContext

        ctx = CContext(topic, CField.VALUE)
        with CClient({"url": registry_url}) as client:
            if fmt == "protobuf":
                decode = CProto(message_type, {"use.deprecated.format": False})
            elif fmt == "avro":
                decode = CAvro(client)
            else:
                # no schema of its own: it validates with the writer's, fetched by id
                decode = CJson(None, schema_registry_client=client)
            return [None if v is None else decode(v, ctx) for v in values]


def assert_nothing_written(client: SchemaRegistryClient, broker: TansuBroker,
                           topic: str) -> None:
    """The topic's value subject has no schema and partition 0 no record."""
    import pytest

    from kontrakt import TopicPartition
    from kontrakt.clients.consumer import Consumer
    from kontrakt.errors import SchemaRegistryError

    with pytest.raises(SchemaRegistryError) as missing:
        client.get_latest_version(f"{topic}-value")
    assert missing.value.http_status_code == 404
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap_servers) as consumer:
        assert consumer.end_offsets([tp], 10) == {tp: 0}
