"""Re-authentication (KIP-368) while records flow.

The SASL side is ``_sasl_proxy.SaslProxy`` in front of Tansu (neither test broker speaks SASL,
TEST-BROKERS.md); it returns a short session lifetime from SaslAuthenticate v1+ and, as a
Kafka broker with connections.max.reauth.ms does, closes a connection that sends any other
request once that lifetime has passed without re-authentication.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from kontrakt import AsyncConsumer, AsyncProducer, TopicPartition
from kontrakt.testing import TansuBroker, free_port
from tests.integration._sasl_proxy import SaslProxy

pytestmark = pytest.mark.integration

LIFETIME_MS = 1500
TOPIC = "reauth-t"


@pytest.fixture
def short_sessions() -> Iterator[SaslProxy]:
    port = free_port("127.0.0.1")
    with TansuBroker(advertised_port=port) as broker:
        broker.create_topic(TOPIC, 1)
        proxy = SaslProxy(port, ("127.0.0.1", broker.port), scram_users={"alice": "pw"},
                          session_lifetime_ms=LIFETIME_MS)
        try:
            yield proxy
        finally:
            proxy.close()


def test_sessions_renewed_in_band_while_records_flow(short_sessions: SaslProxy) -> None:
    """About 5 s of producing and consuming over sessions of 1.5 s: every connection
    re-authenticates in band several times; none is closed or opened again; every record
    sent is acknowledged and read back once, in order."""
    proxy = short_sessions
    conf = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
            "sasl.password": "pw"}
    tp = TopicPartition(TOPIC, 0)

    async def main() -> tuple[list[int], list[bytes], list[bytes]]:
        producer = AsyncProducer(conf, linger_ms=5)
        consumer = AsyncConsumer(conf, group_id=None, fetch_max_wait_ms=100)
        sent: list[bytes] = []
        got: list[bytes] = []
        try:
            await producer.start()
            first = await producer.send_and_wait(TOPIC, b"warm-up")
            consumer.assign([tp])
            consumer.seek(tp, first.offset)
            while not got:  # every connection is open once this record is read back
                for records in (await consumer.getmany(timeout=1.0)).values():
                    got += [r.value for r in records]
            accepted = proxy.accepted
            offsets = [first.offset]
            deadline = time.monotonic() + 5.0
            n = 0
            while time.monotonic() < deadline:
                # A burst of pipelined sends, then one awaited: requests are in flight
                # whenever a re-authentication begins.
                burst = [f"r{n + i}".encode() for i in range(20)]
                n += len(burst)
                futures = [await producer.send(TOPIC, v) for v in burst]
                sent += burst
                offsets += [m.offset for m in await asyncio.gather(*futures)]
                for records in (await consumer.getmany(timeout=0.05)).values():
                    got += [r.value for r in records]
            end = time.monotonic() + 15
            while len(got) < len(sent) + 1 and time.monotonic() < end:
                for records in (await consumer.getmany(timeout=0.5)).values():
                    got += [r.value for r in records]
            assert proxy.accepted == accepted, "a connection was opened again"
        finally:
            await producer.close()
            await consumer.close()
        return offsets, sent, got

    offsets, sent, got = asyncio.run(main())
    assert proxy.expired == 0
    assert got == [b"warm-up", *sent]
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    reauths: dict[int, int] = {}
    for login in proxy.logins:
        if login.reauthentication:
            reauths[login.connection] = reauths.get(login.connection, 0) + 1
    # The producer's and the consumer's broker connections were busy all along.
    assert len(reauths) >= 2 and all(n >= 2 for n in reauths.values()), reauths
    assert all(x.principal == "alice" for x in proxy.logins)
