"""``ClientSettings``: the connection, bootstrap and security part of a Kafka client's
configuration, parsed once by the client that owns it and handed to its network core
(``AsyncKafkaClient``) as typed values, instead of a dict the core validates again."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from kontrakt._config import ClientConfig
from kontrakt.clients._settings import ClientSettings
from kontrakt.clients.admin import AsyncAdminClient
from kontrakt.clients.client import CLIENT_OPTIONS, AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.clients.producer import AsyncProducer
from kontrakt.errors import ConfigError

SERVERS = "127.0.0.1:9, [::1]:19092"
PAIRS = (("127.0.0.1", 9), ("::1", 19092))


def test_settings_are_typed_and_frozen() -> None:
    cfg = ClientConfig(CLIENT_OPTIONS, {"bootstrap.servers": SERVERS, "retry.backoff.ms": 250,
                                        "reconnect.backoff.max.ms": "2000"})
    settings = ClientSettings.of(cfg)
    assert settings.bootstrap == PAIRS
    assert settings.retry_backoff == 0.25 and settings.reconnect_backoff_max == 2.0
    assert settings.request_timeout == 30.0 and settings.ssl_context is None
    assert settings.connection.client_id == "kontrakt" and settings.config is cfg
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.retry_backoff = 1.0  # type: ignore[misc]


def test_bootstrap_is_required() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers is required"):
        ClientSettings.of(ClientConfig(CLIENT_OPTIONS, {}))


def test_every_client_hands_its_core_the_settings_it_parsed() -> None:
    async def main() -> None:
        producer = AsyncProducer(bootstrap_servers=SERVERS, linger_ms=1)
        consumer = AsyncConsumer(bootstrap_servers=SERVERS, group_id="g")
        admin = AsyncAdminClient(bootstrap_servers=SERVERS)
        plain = AsyncKafkaClient(bootstrap_servers=SERVERS)
        for owner, core in ((producer, producer._client), (consumer, consumer.client),
                            (admin, admin.client), (plain, plain)):
            assert core.settings.bootstrap == PAIRS
            # The core reads the owner's own validated config: not a copy validated again.
            assert core.config is getattr(owner, "config", core.config)
        await producer.close()
        await consumer.close()
        await admin.close()
        await plain.close()

    asyncio.run(main())


def test_settings_and_a_config_together_are_refused() -> None:
    settings = ClientSettings.of(ClientConfig(CLIENT_OPTIONS, {"bootstrap.servers": SERVERS}))
    with pytest.raises(ConfigError, match="either settings or a config"):
        AsyncKafkaClient({"client.id": "x"}, _settings=settings)
    assert AsyncKafkaClient(_settings=settings).settings is settings


def test_settings_never_show_secrets() -> None:
    cfg = ClientConfig(CLIENT_OPTIONS, {"bootstrap.servers": SERVERS,
                                        "security.protocol": "SASL_PLAINTEXT",
                                        "sasl.mechanism": "SCRAM-SHA-256",
                                        "sasl.username": "alice", "sasl.password": "s3cr3t-pw"})
    settings = ClientSettings.of(cfg)
    assert settings.connection.sasl is not None
    assert "s3cr3t-pw" not in repr(settings) and "alice" in repr(settings)
