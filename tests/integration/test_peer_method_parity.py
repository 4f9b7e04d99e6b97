"""The methods users of the other clients know, against real brokers: confluent-kafka's
``cluster_id``, ``memberid`` and ``set_sasl_credentials``; kafka-python's ``topics`` and
``bootstrap_connected``; aiokafka's ``topics`` and ``last_poll_timestamp``.

Expectations come from elsewhere than the method under test: the cluster id from
confluent-kafka's own ``cluster_id`` and a raw Metadata request, the member id from the
group coordinator's DescribeGroups, the topic names from a raw Metadata request, the logins
from the SASL proxy (``_sasl_proxy.SaslProxy`` in front of Tansu: neither test broker speaks
SASL that succeeds, TEST-BROKERS.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt import (
    AdminClient,
    AsyncAdminClient,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    Producer,
    TopicPartition,
)
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients._net.security import SaslAuthenticationError
from kontrakt.errors import KafkaTimeoutError
from kontrakt.protocol.messages import MetadataRequest
from kontrakt.serde import StringDeserializer, StringSerializer
from kontrakt.testing import TansuBroker, free_port
from tests.integration._sasl_proxy import SaslProxy

pytestmark = pytest.mark.integration


def _metadata(bootstrap: str) -> Any:
    """A raw Metadata response for every topic (the independent view of the cluster)."""
    async def main() -> Any:
        async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
            return await client.request(MetadataRequest(topics=None))
    return asyncio.run(main())


def _closed_port() -> str:
    return f"127.0.0.1:{free_port('127.0.0.1')}"


# --- cluster_id -----------------------------------------------------------------------------


def test_cluster_id_is_the_one_confluent_kafka_and_metadata_report(
        tansu_broker: TansuBroker) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    bootstrap = tansu_broker.bootstrap_servers
    expected = _metadata(bootstrap).cluster_id
    peer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    try:
        assert peer.cluster_id(15) == expected
    finally:
        peer.flush(5)
    assert isinstance(expected, str) and expected

    with Producer(bootstrap_servers=bootstrap) as producer:
        assert producer.cluster_id() == expected
    with Consumer(bootstrap_servers=bootstrap, group_id=None) as consumer:
        assert consumer.cluster_id(15) == expected
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        assert admin.cluster_id() == expected
    # confluent-kafka's default, -1, waits without limit (each start still bounds itself).
    with Producer(bootstrap_servers=bootstrap) as producer, \
            Consumer(bootstrap_servers=bootstrap, group_id=None) as consumer, \
            AdminClient(bootstrap_servers=bootstrap) as admin:
        assert [producer.cluster_id(-1), consumer.cluster_id(-1), admin.cluster_id(-1)] \
            == [expected] * 3

    async def main() -> list[str | None]:
        async with AsyncProducer(bootstrap_servers=bootstrap) as p, \
                AsyncConsumer(bootstrap_servers=bootstrap, group_id=None) as c, \
                AsyncAdminClient(bootstrap_servers=bootstrap) as a:
            return [await p.cluster_id(), await c.cluster_id(), await a.cluster_id(15)]

    assert asyncio.run(main()) == [expected] * 3


def test_cluster_id_gives_up_at_its_timeout_without_a_broker() -> None:
    """As confluent-kafka's (which raises _TIMED_OUT): an error, not None, and soon."""
    conf = {"bootstrap.servers": _closed_port(), "request.timeout.ms": 20000}
    with Consumer(conf, group_id=None) as consumer:
        began = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            consumer.cluster_id(0.5)
        assert time.monotonic() - began < 5
    admin = AdminClient(conf)
    try:
        began = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            admin.cluster_id(0.5)
        assert time.monotonic() - began < 5
    finally:
        admin.close()
    producer = Producer(conf, max_block_ms=20000)
    try:
        began = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            producer.cluster_id(0.5)
        assert time.monotonic() - began < 5
    finally:
        producer.close(0)


# --- topics ---------------------------------------------------------------------------------


def test_topics_is_every_readable_topic_asked_afresh(tansu_broker: TansuBroker,
                                                     topic_name: str) -> None:
    bootstrap = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(f"{topic_name}-a", 2)
    with Consumer(bootstrap_servers=bootstrap, group_id=None) as consumer:
        first = consumer.topics()
        expected = {t.name for t in _metadata(bootstrap).topics if not t.is_internal}
        assert f"{topic_name}-a" in first
        assert first == expected
        # A topic made after the first call is in the next: each call asks the brokers.
        tansu_broker.create_topic(f"{topic_name}-b", 1)
        assert f"{topic_name}-b" in consumer.topics()
        assert set(consumer.list_topics()) >= consumer.topics()

    async def main() -> set[str]:
        async with AsyncConsumer(bootstrap_servers=bootstrap, group_id=None) as c:
            return await c.topics()

    assert {f"{topic_name}-a", f"{topic_name}-b"} <= asyncio.run(main())


# --- bootstrap_connected --------------------------------------------------------------------


def test_bootstrap_connected_follows_the_connections(tansu_broker: TansuBroker) -> None:
    bootstrap = tansu_broker.bootstrap_servers
    with Consumer(bootstrap_servers=_closed_port(), group_id=None) as nowhere:
        assert nowhere.bootstrap_connected() is False
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=None)
    consumer.list_topics()
    assert consumer.bootstrap_connected() is True
    consumer.close()
    assert consumer.bootstrap_connected() is False

    producer = Producer(bootstrap_servers=bootstrap)
    producer.cluster_id(15)
    assert producer.bootstrap_connected() is True
    producer.close()
    assert producer.bootstrap_connected() is False

    async def main() -> list[bool]:
        c = AsyncConsumer(bootstrap_servers=bootstrap, group_id=None)
        p = AsyncProducer(bootstrap_servers=bootstrap)
        seen = [c.bootstrap_connected(), p.bootstrap_connected()]
        await c.start()
        await p.start()
        seen += [c.bootstrap_connected(), p.bootstrap_connected()]
        await c.close()
        await p.close()
        return [*seen, c.bootstrap_connected(), p.bootstrap_connected()]

    assert asyncio.run(main()) == [False, False, True, True, False, False]


# --- memberid -------------------------------------------------------------------------------


def test_memberid_is_the_coordinators_while_a_member(tansu_broker: TansuBroker,
                                                     topic_name: str) -> None:
    bootstrap = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(topic_name, 1)
    group = f"g-{topic_name}"
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=group,
                        auto_offset_reset="earliest")
    try:
        assert consumer.memberid() is None
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.5)
        assert consumer.assignment()
        member = consumer.memberid()
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            described = admin.describe_consumer_groups([group])[group]
        assert member is not None
        assert [m.member_id for m in described.members] == [member]
        consumer.unsubscribe()
        # The LeaveGroup goes out in the background, after the hand-back.
        deadline = time.monotonic() + 15
        while consumer.memberid() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert consumer.memberid() is None
    finally:
        consumer.close()
    with pytest.raises(Exception, match="closed"):
        consumer.memberid()


# --- last_poll_timestamp --------------------------------------------------------------------


def test_last_poll_timestamp_is_the_wall_clock_of_the_last_fetch(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    bootstrap = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    with Producer(bootstrap_servers=bootstrap) as producer:
        producer.send_and_wait(topic_name, b"one", partition=0)
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=None,
                        auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        with pytest.raises(Exception, match="not assigned"):
            consumer.last_poll_timestamp(tp)
        consumer.assign([tp])
        assert consumer.last_poll_timestamp(tp) is None
        before = int(time.time() * 1000)
        record = None
        deadline = time.monotonic() + 15
        while record is None and time.monotonic() < deadline:
            record = consumer.poll(0.5)
        after = int(time.time() * 1000)
        assert record is not None
        first = consumer.last_poll_timestamp(tp)
        assert first is not None and before <= first <= after
        # At the end of the log the answers carry no records (and, with a fetch session,
        # leave the partition out): the watermark is told again all the same.
        time.sleep(0.3)
        consumer.poll(0.5)
        later = consumer.last_poll_timestamp(tp)
        assert later is not None and later > first
    finally:
        consumer.close()


# --- set_sasl_credentials -------------------------------------------------------------------

PASSWORD = "S3CRET-right-5a1f"
WRONG = "S3CRET-wrong-77e0"


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[SaslProxy]:
    port = free_port("127.0.0.1")
    with TansuBroker(advertised_port=port) as broker:
        broker.create_topic("sasl-creds", 1)
        proxy = SaslProxy(port, ("127.0.0.1", broker.port),
                          scram_users={"alice": PASSWORD, "carol": PASSWORD},
                          plain_users={"bob": PASSWORD})
        try:
            yield proxy
        finally:
            proxy.close()


def _sasl(proxy: SaslProxy, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


@pytest.mark.parametrize(("mechanism", "user"), [("PLAIN", "bob"),
                                                 ("SCRAM-SHA-256", "alice")])
def test_a_refused_login_succeeds_after_set_sasl_credentials(sasl_broker: SaslProxy,
                                                             mechanism: str,
                                                             user: str) -> None:
    conf = _sasl(sasl_broker, mechanism, user, WRONG)
    before = len(sasl_broker.logins)
    with Producer(conf) as producer:
        with pytest.raises(SaslAuthenticationError):
            producer.send_and_wait("sasl-creds", b"x")
        producer.set_sasl_credentials(user, PASSWORD)
        md = producer.send_and_wait("sasl-creds", f"after-{mechanism}".encode())
    with Consumer(conf, group_id=None, auto_offset_reset="earliest") as consumer:
        with pytest.raises(SaslAuthenticationError):
            consumer.list_topics()
        consumer.set_sasl_credentials(user, PASSWORD)
        tp = TopicPartition("sasl-creds", 0)
        consumer.assign([tp])
        consumer.seek(tp, md.offset)
        record = None
        deadline = time.monotonic() + 15
        while record is None and time.monotonic() < deadline:
            record = consumer.poll(0.5)
        assert record is not None and record.value == f"after-{mechanism}".encode()
    with AdminClient(conf) as admin:
        with pytest.raises(SaslAuthenticationError):
            admin.list_topics()
        admin.set_sasl_credentials(user, PASSWORD)
        assert "sasl-creds" in admin.list_topics()
    logins = sasl_broker.logins[before:]
    assert logins and {(x.mechanism, x.principal) for x in logins} == {(mechanism, user)}


def test_set_sasl_credentials_on_the_async_clients(sasl_broker: SaslProxy) -> None:
    conf = _sasl(sasl_broker, "SCRAM-SHA-512", "alice", WRONG)

    async def main() -> None:
        admin = AsyncAdminClient(conf)
        try:
            with pytest.raises(SaslAuthenticationError):
                await admin.list_topics()
            admin.set_sasl_credentials("alice", PASSWORD)
            assert "sasl-creds" in await admin.list_topics()
        finally:
            await admin.close()
        producer = AsyncProducer(conf)
        with pytest.raises(SaslAuthenticationError):
            await producer.start()
        producer.set_sasl_credentials("alice", PASSWORD)
        await producer.start()
        await producer.send_and_wait("sasl-creds", b"async")
        await producer.close()

    asyncio.run(main())


def test_a_reauthentication_logs_in_with_the_new_password() -> None:
    """Open connections stay open (confluent-kafka's contract); their next in-band
    re-authentication (KIP-368) uses the new password: a rotation with no reconnect. (A
    broker refuses a re-authentication as another user, so a rotation keeps the user.)"""
    port = free_port("127.0.0.1")
    with TansuBroker(advertised_port=port) as broker:
        proxy = SaslProxy(port, ("127.0.0.1", broker.port), plain_users={"bob": PASSWORD},
                          session_lifetime_ms=1200)
        try:
            conf = _sasl(proxy, "PLAIN", "bob", PASSWORD)
            with AdminClient(conf) as admin:
                admin.list_topics()
                admin.list_topics()
                opened = {x.connection for x in proxy.logins}
                # The password changes on the broker, then in the client.
                proxy.plain_users["bob"] = "rotated-9c1e"
                admin.set_sasl_credentials("bob", "rotated-9c1e")
                since = len(proxy.logins)
                deadline = time.monotonic() + 15
                while not any(x.reauthentication for x in proxy.logins[since:]) \
                        and time.monotonic() < deadline:
                    time.sleep(0.1)
                again = [x for x in proxy.logins[since:] if x.reauthentication]
                admin.list_topics()  # the connection still serves requests
            assert again and again[0].connection in opened
            assert proxy.refusals == []
            assert proxy.expired == 0
        finally:
            proxy.close()


def test_set_sasl_credentials_on_the_serializing_clients(sasl_broker: SaslProxy) -> None:
    from kontrakt import DeserializingConsumer, SerializingProducer

    conf = _sasl(sasl_broker, "PLAIN", "bob", WRONG)
    with SerializingProducer(conf, value_serializer=StringSerializer()) as producer:
        with pytest.raises(SaslAuthenticationError):
            producer.send_and_wait("sasl-creds", "x")
        producer.set_sasl_credentials("bob", PASSWORD)
        producer.send_and_wait("sasl-creds", "serialized")
        assert producer.bootstrap_connected() is True
        assert producer.cluster_id() == _metadata_via_proxy(sasl_broker)
    with DeserializingConsumer(conf, group_id=None,
                               value_deserializer=StringDeserializer()) as consumer:
        consumer.set_sasl_credentials("bob", PASSWORD)
        assert "sasl-creds" in consumer.topics()


def _metadata_via_proxy(proxy: SaslProxy) -> str | None:
    async def main() -> str | None:
        async with AsyncKafkaClient(_sasl(proxy, "PLAIN", "bob", PASSWORD)) as client:
            resp = await client.request(MetadataRequest(topics=None))
            return resp.cluster_id  # type: ignore[no-any-return]
    return asyncio.run(main())
