"""Logging in with a delegation token made by the admin client (SASL/SCRAM ``tokenauth``).

The token comes from ``AsyncAdminClient.create_delegation_token`` against the crafted admin
broker (neither test broker issues tokens, TEST-BROKERS.md). Logins then go through
``_sasl_proxy.SaslProxy`` in front of Tansu, which knows the token as a Kafka broker would
(id, owner, HMAC) and checks Kafka's SCRAM token login: the token id as the user, the
base64 of the HMAC as the password, the ``tokenauth=true`` extension; the login's principal
is the token's owner.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt import Consumer, KafkaClient, Producer, TopicPartition
from kontrakt.clients._net.security import SaslAuthenticationError
from kontrakt.clients.admin import AsyncAdminClient, DelegationToken
from kontrakt.protocol.messages import MetadataRequest
from kontrakt.testing import TansuBroker, free_port
from tests._crafted_broker import CraftedBroker
from tests.integration._sasl_proxy import SaslProxy
from tests.unit.admin._token_store import TokenStore

pytestmark = pytest.mark.integration


def _token() -> DelegationToken:
    async def main() -> DelegationToken:
        async with CraftedBroker(TokenStore().handlers()) as broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap}) as admin:
            return await admin.create_delegation_token()

    return asyncio.run(main())


@pytest.fixture(scope="module")
def token_broker() -> Iterator[tuple[SaslProxy, DelegationToken]]:
    token = _token()
    port = free_port("127.0.0.1")
    with TansuBroker(advertised_port=port) as broker:
        broker.create_topic("token-t", 1)
        owner = token.token_info.owner
        with SaslProxy(port, ("127.0.0.1", broker.port), scram_users={"alice": "pw"},
                       tokens={token.token_info.token_id: (str(owner),
                                                           token.scram_password)}) as proxy:
            yield proxy, token


def _conf(proxy: SaslProxy, token: DelegationToken, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": token.token_info.token_id,
            "sasl.password": token.scram_password, "sasl.scram.tokenauth": True, **extra}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_records_flow_after_a_token_login(token_broker: tuple[SaslProxy, DelegationToken],
                                          mechanism: str) -> None:
    proxy, token = token_broker
    conf = _conf(proxy, token, **{"sasl.mechanism": mechanism})
    before = len(proxy.logins)
    with Producer(conf) as producer:
        md = producer.send_and_wait("token-t", b"by-token")
    with Consumer({**conf, "group.id": None}) as consumer:
        consumer.assign([TopicPartition("token-t", 0)])
        consumer.seek(TopicPartition("token-t", 0), md.offset)
        deadline = time.monotonic() + 15
        record = None
        while record is None and time.monotonic() < deadline:
            record = consumer.poll(1.0)
    assert record is not None and record.value == b"by-token"
    logins = proxy.logins[before:]
    assert logins and {(x.mechanism, x.principal) for x in logins} == {
        (mechanism, "User:admin")}
    assert all(x.extensions == {"tokenauth": "true"} for x in logins)


def test_token_without_tokenauth_or_with_a_wrong_hmac_is_refused(
        token_broker: tuple[SaslProxy, DelegationToken]) -> None:
    proxy, token = token_broker
    for conf in (_conf(proxy, token, **{"sasl.scram.tokenauth": False}),
                 _conf(proxy, token, **{"sasl.password": "AAAA" + token.scram_password[4:]})):
        start = time.monotonic()
        with pytest.raises(SaslAuthenticationError, match="SCRAM-SHA-512"), \
                KafkaClient(conf) as k:
            k.request(MetadataRequest(topics=None))
        assert time.monotonic() - start < 5
