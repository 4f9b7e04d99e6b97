"""SASL PLAIN and SCRAM end to end, and refused credentials failing at once.

Neither test broker speaks SASL that succeeds (TEST-BROKERS.md): Tansu runs behind
``_sasl_proxy.SaslProxy``, which verifies SCRAM with ``scramp`` (an independent
implementation) and answers as a Kafka broker does, then forwards to Tansu.

A wrong secret used to be retried for ``request.timeout.ms`` (31 handshakes in 29 s) and
surface as NoBrokersAvailableError; now every client raises SaslAuthenticationError from its
first call that needs a connection, after one login attempt.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from kontrakt import (
    AdminClient,
    AsyncAdminClient,
    AsyncConsumer,
    AsyncKafkaClient,
    AsyncProducer,
    Consumer,
    KafkaClient,
    Producer,
    TopicPartition,
)
from kontrakt.clients._net.security import SaslAuthenticationError
from kontrakt.errors import AuthenticationError
from kontrakt.protocol.messages import MetadataRequest
from kontrakt.testing import TansuBroker, free_port
from tests.integration._sasl_proxy import SaslProxy

pytestmark = pytest.mark.integration

PASSWORD = "S3CRET-right-91c2"
WRONG = "S3CRET-wrong-0d7e"
#: generous for a loaded 2-core machine; the retry loop took 29 s
FAST = 5.0


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[SaslProxy]:
    port = free_port("127.0.0.1")
    with TansuBroker(advertised_port=port) as broker:
        broker.create_topic("sasl-t", 1)
        proxy = SaslProxy(port, ("127.0.0.1", broker.port),
                          scram_users={"alice": PASSWORD}, plain_users={"bob": PASSWORD})
        try:
            yield proxy
        finally:
            proxy.close()


def _conf(proxy: SaslProxy, mechanism: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": "bob" if mechanism == "PLAIN" else "alice",
            "sasl.password": password}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_records_flow_after_login(sasl_broker: SaslProxy, mechanism: str) -> None:
    conf = _conf(sasl_broker, mechanism, PASSWORD)
    before = len(sasl_broker.logins)
    with Producer(conf) as producer:
        md = producer.send_and_wait("sasl-t", f"v-{mechanism}".encode())
    with Consumer({**conf, "group.id": None, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition("sasl-t", 0)])
        consumer.seek(TopicPartition("sasl-t", 0), md.offset)
        deadline = time.monotonic() + 15
        record = None
        while record is None and time.monotonic() < deadline:
            record = consumer.poll(1.0)
    assert record is not None and record.value == f"v-{mechanism}".encode()
    logins = sasl_broker.logins[before:]
    assert logins and {(x.mechanism, x.principal) for x in logins} == {
        (mechanism, "bob" if mechanism == "PLAIN" else "alice")}


def _sync_calls(conf: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    def producer() -> None:
        with Producer(conf) as p:
            p.send_and_wait("sasl-t", b"x")

    def producer_flush() -> None:
        with Producer(conf) as p:
            p.produce("sasl-t", b"x")
            p.flush(20)

    def consumer() -> None:
        with Consumer({**conf, "group.id": "g-sasl"}) as c:
            c.subscribe(["sasl-t"])
            c.poll(20)

    def admin() -> None:
        with AdminClient(conf) as a:
            a.list_topics()

    def client() -> None:
        with KafkaClient(conf) as k:
            k.request(MetadataRequest(topics=None))

    return {"Producer.send_and_wait": producer, "Producer.flush": producer_flush,
            "Consumer.poll": consumer, "AdminClient.list_topics": admin,
            "KafkaClient.request": client}


def _async_calls(conf: dict[str, Any]) -> dict[str, Callable[[], Awaitable[Any]]]:
    async def producer() -> None:
        async with AsyncProducer(conf) as p:
            await p.send_and_wait("sasl-t", b"x")

    async def consumer() -> None:
        c = AsyncConsumer({**conf, "group.id": "g-sasl"})
        try:
            c.subscribe(["sasl-t"])
            await c.getmany(timeout=20)
        finally:
            await c.close()

    async def admin() -> None:
        a = AsyncAdminClient(conf)
        try:
            await a.list_topics()
        finally:
            await a.close()

    async def client() -> None:
        k = AsyncKafkaClient(conf)
        try:
            await k.request(MetadataRequest(topics=None))
        finally:
            await k.close()

    return {"AsyncProducer.send_and_wait": producer, "AsyncConsumer.getmany": consumer,
            "AsyncAdminClient.list_topics": admin, "AsyncKafkaClient.request": client}


def _check(err: BaseException, mechanism: str, proxy: SaslProxy, elapsed: float) -> None:
    assert isinstance(err, SaslAuthenticationError), repr(err)
    assert isinstance(err, AuthenticationError) and not err.retriable
    assert err.mechanism == mechanism
    text = "".join(traceback.format_exception(err))
    assert mechanism in str(err) and proxy.bootstrap in str(err), str(err)
    assert WRONG not in text and PASSWORD not in text
    assert elapsed < FAST, f"took {elapsed:.1f}s"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_fails_at_once_from_every_client(sasl_broker: SaslProxy,
                                                        mechanism: str) -> None:
    """Default timeouts (request.timeout.ms 30 s, max.block.ms 60 s): before, each call
    retried for the whole budget."""
    conf = _conf(sasl_broker, mechanism, WRONG)
    for name, call in _sync_calls(conf).items():
        refused = len(sasl_broker.refusals)
        start = time.monotonic()
        with pytest.raises(SaslAuthenticationError) as info:
            call()
        _check(info.value, mechanism, sasl_broker, time.monotonic() - start)
        # One login attempt, not a retry loop.
        assert len(sasl_broker.refusals) - refused == 1, name

    async def main() -> None:
        for name, call in _async_calls(conf).items():
            refused = len(sasl_broker.refusals)
            start = time.monotonic()
            with pytest.raises(SaslAuthenticationError) as info:
                await call()
            _check(info.value, mechanism, sasl_broker, time.monotonic() - start)
            assert len(sasl_broker.refusals) - refused == 1, name

    asyncio.run(main())


def test_unknown_user_and_disabled_mechanism_fail_at_once(sasl_broker: SaslProxy) -> None:
    conf = {**_conf(sasl_broker, "SCRAM-SHA-256", PASSWORD), "sasl.username": "mallory"}
    start = time.monotonic()
    with pytest.raises(SaslAuthenticationError, match="SCRAM-SHA-256 authentication as "
                       "'mallory' failed"), KafkaClient(conf) as k:
        k.request(MetadataRequest(topics=None))
    assert time.monotonic() - start < FAST

    # The proxy enables no GSSAPI: the handshake is refused, listing what it enables.
    from kontrakt.clients._net.connection import BrokerConnection, ConnectionSettings
    from kontrakt.clients._net.security import _handshake

    async def main() -> None:
        host, port = sasl_broker.bootstrap.rsplit(":", 1)
        conn = BrokerConnection(host, int(port), -1, ConnectionSettings())
        await conn.connect()
        try:
            with pytest.raises(SaslAuthenticationError,
                               match=r"does not enable SASL mechanism GSSAPI .enabled: PLAIN, "
                                     r"SCRAM-SHA-256, SCRAM-SHA-512"):
                await _handshake(conn, "GSSAPI", None)
        finally:
            await conn.close()

    asyncio.run(main())
