"""SASL on the cluster: PLAIN and SCRAM-SHA-256/512 checked by every client's own SASL code
(Kontrakt, confluent-kafka, kafka-python, aiokafka); wrong passwords fail; a request before
authentication closes the connection. Neither test broker lets SASL succeed."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt import Consumer, Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kontrakt.errors import AuthenticationError, KafkaConnectionError
from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    AlterUserScramCredentialsRequest,
    ApiVersionsRequest,
    MetadataRequest,
)
from kontrakt.testing import Cluster, send_request

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

import aiokafka
import confluent_kafka

USERS = {"alice": "alice-secret", "bob,=": "b0b"}


@pytest.fixture
def secured(topic: str) -> Iterator[Cluster]:
    with Cluster(2, sasl_users=USERS) as cluster:
        cluster.create_topic(topic, partitions=1)
        yield cluster
        assert cluster.internal_errors() == []


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kontrakt_authenticates_with_every_mechanism(secured: Cluster, topic: str,
                                                     mechanism: str) -> None:
    auth = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_username="bob,=", sasl_password="b0b")
    bs = secured.bootstrap_servers
    with Producer(bootstrap_servers=bs, **auth) as p:
        assert p.send_and_wait(topic, mechanism.encode(), partition=0).offset == 0
    with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest", **auth) as c:
        c.assign([TP(topic, 0)])
        r = c.poll(10)
        assert r is not None and r.value == mechanism.encode()


def test_wrong_passwords_and_unauthenticated_requests_fail(secured: Cluster,
                                                           topic: str) -> None:
    bs = secured.bootstrap_servers
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        with pytest.raises(AuthenticationError), Producer(
                bootstrap_servers=bs, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mechanism, sasl_username="alice", sasl_password="nope",
                max_block_ms=3000, request_timeout_ms=2000) as p:
            p.send_and_wait(topic, b"x", partition=0)
    address = bs.split(",")[0]
    assert send_request(address, ApiVersionsRequest(), 3).error_code == 0  # allowed
    with pytest.raises(KafkaConnectionError):
        send_request(address, MetadataRequest(topics=None), 12)
    assert secured.end_offsets(topic) == [0]


def test_peers_authenticate(secured: Cluster, topic: str) -> None:
    bs = secured.bootstrap_servers
    cp = confluent_kafka.Producer({
        "bootstrap.servers": bs, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": "alice-secret", "log_level": 3})
    cp.produce(topic, b"confluent", partition=0)
    assert cp.flush(10) == 0
    kp = kafka.KafkaProducer(bootstrap_servers=bs, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice",
                             sasl_plain_password="alice-secret")
    kp.send(topic, b"kafka-python", partition=0).get(10)
    kp.close(5)

    async def aio() -> None:
        ap = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bs, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
            sasl_plain_password="alice-secret")
        await ap.start()
        try:
            await ap.send_and_wait(topic, b"aiokafka", partition=0)
        finally:
            await ap.stop()

    asyncio.run(aio())
    bad = confluent_kafka.Producer({
        "bootstrap.servers": bs, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
        "sasl.password": "wrong", "log_level": 0, "message.timeout.ms": 2000})
    bad.produce(topic, b"never", partition=0)
    deadline = time.monotonic() + 10
    while bad.flush(0.2) and time.monotonic() < deadline:
        pass
    assert secured.end_offsets(topic) == [3]


def test_scram_credentials_altered_by_admin_are_the_ones_checked(topic: str) -> None:
    admin_auth = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                      sasl_username="admin", sasl_password="pw")
    with Cluster(1, sasl_users={"admin": "pw"}) as cluster:
        cluster.create_topic(topic)
        bs = cluster.bootstrap_servers
        sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)

        def carol_can_produce(mechanism: str) -> bool:
            try:
                with Producer(bootstrap_servers=bs, security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism=mechanism, sasl_username="carol",
                              sasl_password="c4rol", max_block_ms=3000) as p:
                    p.send_and_wait(topic, b"c", partition=0)
                return True
            except AuthenticationError:
                return False

        with AdminClient(bootstrap_servers=bs, **admin_auth) as admin:
            assert not carol_can_produce("SCRAM-SHA-512")
            admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion("carol", sha512, "c4rol")])
            described = admin.describe_user_scram_credentials(["carol"])["carol"]
            assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] \
                == [(ScramMechanism.SCRAM_SHA_512, 8192)]
            everyone = admin.describe_user_scram_credentials()
            assert sorted(everyone) == ["admin", "carol"]
            assert carol_can_produce("SCRAM-SHA-512")
            assert not carol_can_produce("SCRAM-SHA-256")  # no credential for that one
            admin.alter_user_scram_credentials([
                UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)])
            assert not carol_can_produce("SCRAM-SHA-512")
            missing = admin.describe_user_scram_credentials(["carol"],
                                                            return_exceptions=True)
            assert isinstance(missing["carol"], E.ResourceNotFoundError)
        assert cluster.end_offsets(topic) == [1]


def test_scram_credential_requests_are_checked(cluster: Cluster) -> None:
    """Kafka's checks, sent raw (Kontrakt's admin client refuses these itself)."""
    AR = AlterUserScramCredentialsRequest
    address = cluster.bootstrap_servers.split(",")[0]

    def upsert(name: str, mechanism: int, iterations: int) -> Any:
        return AR.ScramCredentialUpsertion(name=name, mechanism=mechanism,
                                           iterations=iterations, salt=b"s" * 16,
                                           salted_password=b"p" * 32)

    resp = send_request(address, AR(deletions=[AR.ScramCredentialDeletion(
        name="ghost", mechanism=1)], upsertions=[
        upsert("weak", 1, 100), upsert("odd", 9, 4096), upsert("twice", 1, 4096),
        upsert("twice", 1, 4096), upsert("fine", 2, 4096)]), 0)
    assert {r.user: r.error_code for r in resp.results} == {
        "ghost": E.ResourceNotFoundError.code, "weak": E.UnacceptableCredentialError.code,
        "odd": E.UnsupportedSaslMechanismError.code, "twice": E.DuplicateResourceError.code,
        "fine": 0}
