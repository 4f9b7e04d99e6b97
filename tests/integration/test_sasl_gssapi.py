"""SASL/GSSAPI (Kerberos) end to end against a real MIT KDC.

The test makes a realm with Debian's ``krb5-kdc`` on 127.0.0.1 (``_kdc.Kdc``), a service
principal ``kafka/127.0.0.1`` and a user ``alice``, with keytabs made by ``kadmin.local``.
Neither test broker speaks SASL (TEST-BROKERS.md): Tansu runs behind
``_sasl_proxy.SaslProxy``, whose GSSAPI acceptor (the ``gssapi`` binding with the service
keytab, as a Kafka broker's JAAS login has) checks the client's tickets and the RFC 4752
security-layer round, then forwards to Tansu. Skipped, saying why, where no KDC or no
``gssapi`` package can be had.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kontrakt import AsyncKafkaClient, Consumer, KafkaClient, Producer, TopicPartition
from kontrakt.clients._net.security import SaslAuthenticationError
from kontrakt.errors import AuthenticationError, ConfigError
from kontrakt.protocol.messages import MetadataRequest
from kontrakt.testing import TansuBroker, free_port
from tests.integration._kdc import REALM, Kdc, kdc_missing
from tests.integration._sasl_proxy import SaslProxy

pytestmark = pytest.mark.integration

#: generous for a loaded 2-core machine; a retry loop would take request.timeout.ms (30 s)
FAST = 5.0


class Realm:
    def __init__(self, kdc: Kdc, proxy: SaslProxy, alice_keytab: Path, stale_keytab: Path):
        self.kdc, self.proxy = kdc, proxy
        self.alice_keytab, self.stale_keytab = alice_keytab, stale_keytab

    def conf(self, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "GSSAPI", "sasl.kerberos.principal": "alice",
                "sasl.kerberos.keytab": str(self.alice_keytab), **extra}


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    why = kdc_missing()
    if why:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("krb5")
    kdc = Kdc(d)
    try:
        kdc.add_principal("kafka/127.0.0.1")
        kdc.add_principal("alice")
        service = kdc.keytab("kafka/127.0.0.1", d / "kafka.keytab")
        # Exporting a key makes a new one: the first keytab is stale once the second exists.
        stale = kdc.keytab("alice", d / "alice-old.keytab")
        alice = kdc.keytab("alice", d / "alice.keytab")
        with pytest.MonkeyPatch.context() as env:
            env.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
            env.setenv("KRB5_KTNAME", str(service))
            env.setenv("KRB5CCNAME", f"FILE:{d / 'ccache'}")
            port = free_port("127.0.0.1")
            with TansuBroker(advertised_port=port) as broker:
                broker.create_topic("krb-t", 1)
                with SaslProxy(port, ("127.0.0.1", broker.port),
                               gssapi_keytab=str(service)) as proxy:
                    yield Realm(kdc, proxy, alice, stale)
    finally:
        kdc.close()


def test_records_flow_after_kerberos_login(realm: Realm) -> None:
    conf = realm.conf()
    before = len(realm.proxy.logins)
    with Producer(conf) as producer:
        md = producer.send_and_wait("krb-t", b"v-gssapi")
    with Consumer({**conf, "group.id": None, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition("krb-t", 0)])
        consumer.seek(TopicPartition("krb-t", 0), md.offset)
        deadline = time.monotonic() + 15
        record = None
        while record is None and time.monotonic() < deadline:
            record = consumer.poll(1.0)
    assert record is not None and record.value == b"v-gssapi"
    logins = realm.proxy.logins[before:]
    assert logins and {(x.mechanism, x.principal) for x in logins} == {
        ("GSSAPI", f"alice@{REALM}")}


def test_async_client_logs_in_from_the_keytab(realm: Realm) -> None:
    async def main() -> Any:
        k = AsyncKafkaClient(realm.conf())
        try:
            return await k.request(MetadataRequest(topics=None))
        finally:
            await k.close()

    before = len(realm.proxy.logins)
    resp = asyncio.run(main())
    assert "krb-t" in {t.name for t in resp.topics}
    assert realm.proxy.logins[before:][0].principal == f"alice@{REALM}"


def test_default_credentials_come_from_the_client_keytab(realm: Realm, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Without sasl.kerberos.keytab or .principal, the library's defaults apply: here an
    empty ticket cache and the client keytab named by KRB5_CLIENT_KTNAME."""
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'ccache'}")
    monkeypatch.setenv("KRB5_CLIENT_KTNAME", str(realm.alice_keytab))
    conf = realm.conf()
    del conf["sasl.kerberos.keytab"], conf["sasl.kerberos.principal"]
    before = len(realm.proxy.logins)
    with KafkaClient(conf) as k:
        k.request(MetadataRequest(topics=None))
    assert [x.principal for x in realm.proxy.logins[before:]] == [f"alice@{REALM}"]


def test_sessions_renewed_in_band(realm: Realm) -> None:
    """A broker session of 1.5 s (KIP-368): the connection logs in again with Kerberos in
    band, before the session ends, and is never closed or opened again."""
    port = free_port("127.0.0.1")
    with SaslProxy(port, realm.proxy.target, gssapi_keytab=realm.proxy.gssapi_keytab,
                   session_lifetime_ms=1500) as proxy:
        async def main() -> int:
            k = AsyncKafkaClient({**realm.conf(), "bootstrap.servers": proxy.bootstrap})
            n = 0
            try:
                deadline = time.monotonic() + 4
                while time.monotonic() < deadline:
                    await k.request(MetadataRequest(topics=None))
                    n += 1
                    await asyncio.sleep(0.05)
            finally:
                await k.close()
            return n

        requests = asyncio.run(main())
        assert requests > 10
        assert proxy.expired == 0 and proxy.accepted == 1
        assert [x.reauthentication for x in proxy.logins][:3] == [False, True, True]
        assert {x.principal for x in proxy.logins} == {f"alice@{REALM}"}


def _refused(conf: dict[str, Any]) -> tuple[SaslAuthenticationError, float]:
    start = time.monotonic()
    with pytest.raises(SaslAuthenticationError) as info, KafkaClient(conf) as k:
        k.request(MetadataRequest(topics=None))
    err = info.value
    assert isinstance(err, AuthenticationError) and not err.retriable
    assert err.mechanism == "GSSAPI"
    assert conf["bootstrap.servers"] in str(err), str(err)
    return err, time.monotonic() - start


def test_principal_not_in_the_keytab_fails_at_once(realm: Realm) -> None:
    refused = len(realm.proxy.refusals)
    err, took = _refused(realm.conf(**{"sasl.kerberos.principal": "bob"}))
    assert took < FAST, f"took {took:.1f}s"
    assert "no Kerberos credentials for bob" in str(err), str(err)
    assert len(realm.proxy.refusals) == refused  # refused before reaching the broker


def test_stale_keytab_fails_at_once(realm: Realm) -> None:
    """The KDC refuses a key that was replaced (the keytab is out of date)."""
    err, took = _refused(realm.conf(**{"sasl.kerberos.keytab": str(realm.stale_keytab)}))
    assert took < FAST, f"took {took:.1f}s"
    assert "alice" in str(err) and "alice-old.keytab" in str(err), str(err)


def test_unknown_service_fails_at_once(realm: Realm) -> None:
    """A service name the KDC does not know (sasl.kerberos.service.name) gets no ticket."""
    err, took = _refused(realm.conf(**{"sasl.kerberos.service.name": "kafkax"}))
    assert took < FAST, f"took {took:.1f}s"
    assert "kafkax/127.0.0.1" in str(err), str(err)


def test_broker_refusing_the_ticket_fails_at_once(realm: Realm, tmp_path: Path) -> None:
    """An acceptor whose service key is not the one the KDC sealed the ticket with refuses
    the login (SASL_AUTHENTICATION_FAILED), and the client raises at once."""
    old_service = realm.kdc.keytab("kafka/127.0.0.1", tmp_path / "svc-old.keytab")
    new_service = realm.kdc.keytab("kafka/127.0.0.1", tmp_path / "svc-new.keytab")
    port = free_port("127.0.0.1")
    try:
        with SaslProxy(port, realm.proxy.target, gssapi_keytab=str(old_service)) as proxy:
            err, took = _refused({**realm.conf(), "bootstrap.servers": proxy.bootstrap})
            assert took < FAST, f"took {took:.1f}s"
            assert proxy.refusals and "GSSAPI" in proxy.refusals[0]
            assert "authentication as 'alice' failed" in str(err), str(err)
    finally:
        # The module's proxy reads KRB5_KTNAME's keytab: give it the key now current.
        os.replace(new_service, realm.proxy.gssapi_keytab or "")


def test_gssapi_without_the_binding_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)
    with pytest.raises(ConfigError, match=r"kontrakt\[gssapi\]"):
        AsyncKafkaClient({"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_SSL",
                          "sasl.mechanism": "GSSAPI"})
