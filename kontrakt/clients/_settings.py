"""The settings every Kafka client's network core shares, parsed once.

A client (producer, consumer, admin, plain) validates the user's configuration against
its option table (:class:`~kontrakt._config.ClientConfig`), then :meth:`ClientSettings.of`
turns the connection, bootstrap and security part into typed values (seconds, parsed
``host:port`` pairs, the TLS context and the SASL authenticator) and hands them to
:class:`~kontrakt.clients.client.AsyncKafkaClient`: nothing is validated or split twice.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from kontrakt._config import ClientConfig
from kontrakt.clients._net.connection import ConnectionSettings
from kontrakt.clients._net.security import build_sasl, build_ssl_context
from kontrakt.clients.cluster import parse_bootstrap

__all__ = ["ClientSettings"]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """The connection, bootstrap and security settings of one Kafka client (frozen).

    Attributes:
        bootstrap: ``bootstrap.servers`` as ``(host, port)`` pairs (IPv6 hosts unbracketed).
        connection: how each broker connection is made (client id, request and connect
            timeouts, in-flight limit, largest frame, TLS context, SASL authenticator).
        metadata_max_age: ``metadata.max.age.ms`` in seconds.
        rebootstrap: ``metadata.recovery.strategy`` is ``rebootstrap`` (KIP-899, KIP-1102).
        rebootstrap_trigger: ``metadata.recovery.rebootstrap.trigger.ms`` in seconds.
        retry_backoff, retry_backoff_max: ``retry.backoff(.max).ms`` in seconds.
        reconnect_backoff, reconnect_backoff_max: ``reconnect.backoff(.max).ms`` in seconds.
        config: the validated configuration these were parsed from (every option of the
            client, not only these); kept out of ``repr``.
    """

    bootstrap: tuple[tuple[str, int], ...]
    connection: ConnectionSettings
    metadata_max_age: float
    rebootstrap: bool
    rebootstrap_trigger: float
    retry_backoff: float
    retry_backoff_max: float
    reconnect_backoff: float
    reconnect_backoff_max: float
    config: ClientConfig = field(repr=False, compare=False)

    @property
    def request_timeout(self) -> float:
        """``request.timeout.ms`` in seconds."""
        return self.connection.request_timeout

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context (None without TLS)."""
        return self.connection.ssl_context

    @classmethod
    def of(cls, cfg: ClientConfig) -> ClientSettings:
        """The settings in ``cfg``, a client's validated configuration (its table includes
        :data:`~kontrakt.clients.client.CLIENT_OPTIONS`).

        Raises:
            ConfigError: ``bootstrap.servers`` is unset, a TLS file cannot be loaded, or the
                SASL options are incomplete.
        """
        servers = cfg.require("bootstrap.servers")
        return cls(
            bootstrap=tuple(parse_bootstrap(servers)),
            connection=ConnectionSettings(
                client_id=cfg["client.id"],
                request_timeout=cfg["request.timeout.ms"] / 1000,
                connect_timeout=cfg["socket.connection.setup.timeout.ms"] / 1000,
                max_in_flight=cfg["max.in.flight.requests.per.connection"],
                max_frame_bytes=cfg["receive.message.max.bytes"],
                ssl_context=build_ssl_context(cfg),
                sasl=build_sasl(cfg),
            ),
            metadata_max_age=cfg["metadata.max.age.ms"] / 1000,
            rebootstrap=cfg["metadata.recovery.strategy"] == "rebootstrap",
            rebootstrap_trigger=cfg["metadata.recovery.rebootstrap.trigger.ms"] / 1000,
            retry_backoff=cfg["retry.backoff.ms"] / 1000,
            retry_backoff_max=cfg["retry.backoff.max.ms"] / 1000,
            reconnect_backoff=cfg["reconnect.backoff.ms"] / 1000,
            reconnect_backoff_max=cfg["reconnect.backoff.max.ms"] / 1000,
            config=cfg,
        )
