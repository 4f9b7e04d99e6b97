"""No configured secret ever appears in an error, a repr or a log line.

Every secret option (SASL and key passwords, registry basic auth, bearer token, OAuth client
secret, credentials in a registry url) is set to a recognisable value, then the clients are
made to fail in the ways a user meets first: a mistyped value, a broker that refuses the SASL
handshake (Tansu offers no SASL), a wrong key password, an unreachable registry and token
endpoint. Everything they said is searched for the secrets: each error's whole chain as a
formatted traceback, the reprs of clients and configs, and every log record at DEBUG.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kontrakt import AdminClient, AsyncKafkaClient, Consumer, KafkaClient, Producer
from kontrakt._config import COMMON_OPTIONS, SECURITY_OPTIONS, ClientConfig
from kontrakt.clients import SerializingProducer
from kontrakt.clients._net.security import build_sasl
from kontrakt.errors import ConfigError, KontraktError
from kontrakt.registry import SchemaRegistryClient
from kontrakt.serde import StringSerializer
from kontrakt.testing import TansuBroker

pytestmark = pytest.mark.integration

SASL = "S3CRET-sasl-7f1e"
KEY = "S3CRET-key-2b9c"
BASIC = "S3CRET-basic-44d0"
TOKEN = "S3CRET-token-90aa"
OAUTH = "S3CRET-oauth-c3d1"
IN_URL = "S3CRET-url-5e6f"
SECRETS = (SASL, KEY, BASIC, TOKEN, OAUTH, IN_URL)
CLOSED = "127.0.0.1:9"  # the discard port: nothing listens there on a test machine


def _said(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc)


def _failure(call: Callable[[], Any]) -> str:
    try:
        call()
    except KontraktError as exc:
        return _said(exc)
    raise AssertionError(f"{call} did not fail")


def _assert_hidden(texts: list[str]) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} shown in: {text[-600:]}"


def test_mistyped_secrets_are_not_echoed() -> None:
    texts = []
    for key in ("sasl.password", "ssl.key.password"):
        # A password in the wrong type, e.g. bytes or wrapped in a list.
        for value in ([SASL], (KEY,), SASL.encode(), {"password": KEY}):
            for make in (Producer, Consumer, AdminClient, KafkaClient):
                texts.append(_failure(lambda m=make, k=key, v=value: m(  # type: ignore[misc]
                    {"bootstrap.servers": CLOSED, k: v})))
    _assert_hidden(texts)
    # The type is named, the value is not.
    with pytest.raises(ConfigError) as info:
        Producer({"bootstrap.servers": CLOSED, "sasl.password": 12345})
    assert str(info.value) == ("sasl.password must be a string, got a value of type int "
                               "(not shown: sasl.password is secret)")


def test_reprs_hide_secrets() -> None:
    cfg = ClientConfig({**COMMON_OPTIONS, **SECURITY_OPTIONS},
                       {"bootstrap.servers": CLOSED, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.username": "u", "sasl.password": SASL, "ssl.key.password": KEY})
    texts = [repr(cfg), str(cfg), repr(dict(cfg.items())).replace(SASL, "").replace(KEY, "")]
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        texts.append(repr(build_sasl({**cfg, "sasl.mechanism": mechanism})))
    registry = SchemaRegistryClient({"url": f"http://u:{IN_URL}@{CLOSED}"})
    texts.append(repr(registry))
    texts.append(repr(registry._core.config))  # type: ignore[attr-defined]
    serializer = StringSerializer()
    with SerializingProducer({"bootstrap.servers": CLOSED, "sasl.password": SASL,
                              "security.protocol": "SASL_PLAINTEXT", "sasl.username": "u",
                              "value.serializer": serializer}) as producer:
        texts += [repr(producer), repr(producer.__dict__)]
    registry.close()
    _assert_hidden(texts)
    assert "***" in repr(cfg)


def test_failing_clients_do_not_show_secrets(tansu_broker: TansuBroker, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []

    # SASL against a broker without it: the handshake is refused.
    async def sasl(mechanism: str) -> None:
        client = AsyncKafkaClient(bootstrap_servers=tansu_broker.bootstrap_servers,
                                  security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                                  sasl_username="alice", sasl_password=SASL,
                                  request_timeout_ms=1500, reconnect_backoff_ms=20)
        try:
            texts.append(repr(client))
            await client.start()
        except KontraktError as exc:
            texts.append(_said(exc))
        else:
            raise AssertionError("SASL against Tansu succeeded")
        finally:
            await client.close()

    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        asyncio.run(sasl(mechanism))

    # A producer whose broker is gone: errors and logs while it retries.
    with Producer(bootstrap_servers=CLOSED, security_protocol="SASL_PLAINTEXT",
                  sasl_username="alice", sasl_password=SASL, max_block_ms=500) as p:
        texts.append(repr(p))
        texts.append(_failure(lambda: p.send("t", b"v")))

    # SASL/OAUTHBEARER whose token endpoint does not answer.
    with Producer(bootstrap_servers=tansu_broker.bootstrap_servers,
                  security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                  sasl_oauthbearer_method="oidc", sasl_oauthbearer_client_id="alice",
                  sasl_oauthbearer_client_secret=OAUTH,
                  sasl_oauthbearer_token_endpoint_url=f"http://{CLOSED}/token",
                  max_block_ms=500) as p:
        texts.append(repr(p))
        texts.append(_failure(lambda: p.send("t", b"v")))

    # A wrong key password (the key is encrypted with KEY reversed).
    key, cert = tmp_path / "client.key", tmp_path / "client.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=c", "-passout",
                    f"pass:{KEY[::-1]}"], check=True, capture_output=True, timeout=60)
    texts.append(_failure(lambda: AsyncKafkaClient(
        bootstrap_servers=CLOSED, security_protocol="SSL", ssl_certificate_location=str(cert),
        ssl_key_location=str(key), ssl_key_password=KEY)))

    # Registry: nobody answers at the url, the bearer token's or the OAuth endpoint.
    fast = {"total.timeout.ms": 500, "max.retries": 1, "retries.wait.ms": 10}
    for conf in (
        {"url": f"http://alice:{IN_URL}@{CLOSED}"},
        {"url": f"http://{CLOSED}", "basic.auth.credentials.source": "USER_INFO",
         "basic.auth.user.info": f"alice:{BASIC}"},
        {"url": f"http://{CLOSED}", "bearer.auth.credentials.source": "STATIC_TOKEN",
         "bearer.auth.token": TOKEN},
        {"url": f"http://{CLOSED}", "bearer.auth.credentials.source": "OAUTHBEARER",
         "bearer.auth.client.id": "alice", "bearer.auth.client.secret": OAUTH,
         "bearer.auth.issuer.endpoint.url": f"http://{CLOSED}/token"},
    ):
        with SchemaRegistryClient({**conf, **fast}) as registry:
            texts.append(repr(registry))
            texts.append(_failure(registry.get_subjects))

    texts += [caplog.text] + [r.getMessage() for r in caplog.records]
    assert len(texts) > 10
    _assert_hidden(texts)
