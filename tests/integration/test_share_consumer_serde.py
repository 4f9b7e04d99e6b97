"""DeserializingShareConsumer / AsyncDeserializingShareConsumer on the librdkafka mock cluster,
with Avro values through the registry server Kontrakt embeds.

A record that cannot be deserialized (bytes not in the wire format) sits among good ones:
the good ones all arrive once and are accepted, the bad one raises at the poll after the
records before it, and its acknowledgement is what the docs say (released in implicit mode,
the application's choice in explicit mode). confluent-kafka's ShareConsumer in the same
group, after the deserializing one closed, is the oracle of what the broker kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator

import pytest

from kontrakt import Producer
from kontrakt.clients.serializing import (
    AsyncDeserializingShareConsumer,
    DeserializingShareConsumer,
)
from kontrakt.clients.share import AcknowledgeType
from kontrakt.errors import ValueDeserializationError
from kontrakt.registry import AsyncSchemaRegistryClient, SchemaRegistryClient
from kontrakt.registry.server import RegistryServer
from kontrakt.serde import (
    AsyncAvroDeserializer,
    AvroDeserializer,
    AvroSerializer,
    SerializationContext,
)
from kontrakt.testing import MockCluster

pytestmark = pytest.mark.integration

TOPIC = "orders"
N = 8
#: Where the record that is not in the wire format goes (its offset).
BAD = 3
#: Not the wire format: no magic byte 0, no schema id.
BAD_BYTES = b"\x07not avro"


@dataclasses.dataclass
class Order:
    order_id: str
    qty: int


@pytest.fixture
def registry_url() -> Iterator[str]:
    with RegistryServer() as srv:
        yield srv.url


@pytest.fixture
def registry(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as client:
        yield client


def _cluster(factory: Callable[..., MockCluster], client: SchemaRegistryClient, *,
             attempts: int = 5) -> tuple[MockCluster, list[Order]]:
    """One partition: N good Avro orders with BAD_BYTES at offset BAD (N + 1 records)."""
    cluster = factory(1)
    cluster.create_topic(TOPIC, 1, 1)
    cluster.sharegroup_auto_offset_reset(True)
    cluster.sharegroup_heartbeat_interval_ms(200)
    cluster.sharegroup_max_delivery_attempts(attempts)
    orders = [Order(f"o{i}", i) for i in range(N)]
    ser = AvroSerializer(client, Order)
    payloads: list[bytes | None] = [ser(o, SerializationContext(TOPIC)) for o in orders]
    payloads.insert(BAD, BAD_BYTES)
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        for p in payloads:
            producer.send(TOPIC, value=p)
        producer.flush(10)
    return cluster, orders


def _left_for_the_group(cluster: MockCluster, seconds: float = 2.0) -> list[tuple[int, int | None]]:
    """(offset, delivery count) of what another member of group "g" gets within
    ``seconds``: confluent-kafka's ShareConsumer (the oracle), accepting it all."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    got: list[tuple[int, int | None]] = []
    other = confluent_kafka.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers,
                                           "group.id": "g", "log_level": 3})
    try:
        other.subscribe([TOPIC])
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            for m in other.poll(0.3):
                assert m.error() is None
                got.append((m.offset(), m.delivery_count()))
        other.commit_sync(5)
    finally:
        other.close()
    return got


def test_implicit_mode_returns_the_good_records_once_and_releases_the_bad_one(
        mock_cluster_factory: Callable[..., MockCluster],
        registry: SchemaRegistryClient) -> None:
    # Broken variants tried: the records after the bad one not taken back (the next
    # poll's implicit accept settles them unseen: orders 3..7 never arrive); the bad
    # record accepted instead of released (no second delivery, count 2).
    cluster, orders = _cluster(mock_cluster_factory, registry, attempts=2)
    got: list[Order] = []
    errors: list[tuple[int, bytes | None, int | None]] = []
    with DeserializingShareConsumer(
            bootstrap_servers=cluster.bootstrap_servers, group_id="g",
            value_deserializer=AvroDeserializer(registry, Order)) as consumer:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 15
        while (len(got) < N or len(errors) < 2) and time.monotonic() < deadline:
            try:
                got.extend(r.value for r in consumer.poll(0.5))
            except ValueDeserializationError as exc:
                raw = exc.record
                assert raw is not None
                errors.append((raw.offset, raw.value, consumer.delivery_count(raw)))
    # Every good order once, in order; the bad one raised after the ones before it, was
    # released (not accepted) and came back once (delivery attempt limit 2), then archived.
    assert got == orders
    assert [(o, v) for o, v, _ in errors] == [(BAD, BAD_BYTES)] * 2
    # Released at once: no longer held by the consumer when the error is seen.
    assert [c for _, _, c in errors] == [None, None]
    assert _left_for_the_group(cluster) == []


def test_explicit_mode_leaves_the_bad_record_to_the_application(
        mock_cluster_factory: Callable[..., MockCluster],
        registry: SchemaRegistryClient) -> None:
    # The application rejects the bad record (a dead-letter decision); everything else is
    # accepted, so nothing is left for the group. Broken variant tried: the bad record
    # released by the consumer in explicit mode too (acknowledge(err.record) then raises
    # IllegalStateError: not held).
    cluster, orders = _cluster(mock_cluster_factory, registry)

    async def main() -> tuple[list[Order], list[tuple[int, int | None]]]:
        got: list[Order] = []
        bad: list[tuple[int, int | None]] = []
        async with AsyncDeserializingShareConsumer(
                bootstrap_servers=cluster.bootstrap_servers, group_id="g",
                share_acknowledgement_mode="explicit",
                value_deserializer=AvroDeserializer(registry, Order)) as consumer:
            consumer.subscribe([TOPIC])
            deadline = time.monotonic() + 15
            while (len(got) < N or not bad) and time.monotonic() < deadline:
                try:
                    for r in await consumer.poll(0.5):
                        got.append(r.value)
                        consumer.acknowledge(r)
                except ValueDeserializationError as exc:
                    assert exc.record is not None
                    bad.append((exc.record.offset, consumer.delivery_count(exc.record)))
                    consumer.acknowledge(exc.record, AcknowledgeType.REJECT)
            results = await consumer.commit_sync(5)
            assert results and all(e is None for e in results.values())
        return got, bad

    got, bad = asyncio.run(main())
    assert got == orders
    assert bad == [(BAD, 1)]
    assert _left_for_the_group(cluster) == []


def test_explicit_mode_close_releases_an_unsettled_bad_record(
        mock_cluster_factory: Callable[..., MockCluster],
        registry: SchemaRegistryClient) -> None:
    # The application accepts the good records and leaves the bad one undecided: close()
    # releases it, and only it goes to the next member (delivery count 2). Broken variant
    # tried: the records after the bad one left as handed out when it raised (the
    # application never got them, and close() released them too: 4..8 come back).
    cluster, orders = _cluster(mock_cluster_factory, registry)
    got: list[Order] = []
    with DeserializingShareConsumer(
            bootstrap_servers=cluster.bootstrap_servers, group_id="g",
            share_acknowledgement_mode="explicit", max_poll_records=100,
            value_deserializer=AvroDeserializer(registry, Order)) as consumer:
        consumer.subscribe([TOPIC])
        errors = 0
        deadline = time.monotonic() + 15
        while (len(got) < N or not errors) and time.monotonic() < deadline:
            try:
                for r in consumer.poll(0.5):
                    got.append(r.value)
                    consumer.acknowledge(r)
            except ValueDeserializationError:
                errors += 1
        assert consumer.commit_sync(5)
    assert got == orders and errors == 1
    assert _left_for_the_group(cluster) == [(BAD, 2)]


def test_async_deserializers_stop_at_the_bad_record_too(
        mock_cluster_factory: Callable[..., MockCluster], registry: SchemaRegistryClient,
        registry_url: str) -> None:
    # AsyncAvroDeserializer (awaited per record): the same rule. Delivery attempt limit 1:
    # the released bad record is archived at once. Broken variant tried: the async path
    # skipping a bad record (no error raised).
    cluster, orders = _cluster(mock_cluster_factory, registry, attempts=1)

    async def main() -> tuple[list[Order], list[int]]:
        got: list[Order] = []
        errors: list[int] = []
        async with AsyncSchemaRegistryClient({"url": registry_url}) as client, \
                AsyncDeserializingShareConsumer(
                    bootstrap_servers=cluster.bootstrap_servers, group_id="g",
                    value_deserializer=AsyncAvroDeserializer(client, Order)) as consumer:
            consumer.subscribe([TOPIC])
            deadline = time.monotonic() + 15
            while (len(got) < N or not errors) and time.monotonic() < deadline:
                try:
                    got.extend(r.value for r in await consumer.poll(0.5))
                except ValueDeserializationError as exc:
                    assert exc.record is not None
                    errors.append(exc.record.offset)
        return got, errors

    got, errors = asyncio.run(main())
    assert got == orders
    assert errors == [BAD]
    assert _left_for_the_group(cluster) == []
