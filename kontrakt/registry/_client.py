"""Synchronous Schema Registry client: a thin shell over :mod:`kontrakt.registry._core`.

:class:`SchemaRegistryClient` is its operations (:mod:`kontrakt.registry._schema_ops`,
:mod:`kontrakt.registry._subject_ops`, :mod:`kontrakt.registry._config_ops`) on the sync
transport (:class:`~kontrakt.registry._shell.SyncShell`); this module holds its
documentation of the wire behaviour every operation shares, and its lifecycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

from kontrakt.registry._config_ops import ConfigOps
from kontrakt.registry._schema_ops import SchemaOps
from kontrakt.registry._subject_ops import SubjectOps

__all__ = ["SchemaRegistryClient"]


class SchemaRegistryClient(SchemaOps, SubjectOps, ConfigOps):
    """A Confluent Schema Registry client (thread-safe), with confluent-kafka-python's names.

    Configuration (confluent-kafka-python's property names; snake_case keywords also work):
    ``url`` (one or several comma-separated, tried in turn), ``basic.auth.user.info``,
    ``basic.auth.credentials.source`` (URL / USER_INFO / SASL_INHERIT; credentials in the URL
    are used by default), ``bearer.auth.credentials.source`` (STATIC_TOKEN with
    ``bearer.auth.token``, or OAUTHBEARER client credentials with ``bearer.auth.client.id``,
    ``bearer.auth.client.secret``, ``bearer.auth.scope``, ``bearer.auth.issuer.endpoint.url``),
    ``bearer.auth.logical.cluster``, ``bearer.auth.identity.pool.id``, ``ssl.ca.location``,
    ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``, ``proxy``,
    ``timeout`` (seconds per read or write, default 30), ``connect.timeout.ms`` (10000),
    ``total.timeout.ms`` (30000), ``max.retries`` (3),
    ``retries.wait.ms`` (1000), ``retries.max.wait.ms`` (20000), ``cache.capacity`` (1000),
    ``cache.latest.ttl.sec`` (unset: latest versions cached until cleared) and Kontrakt's
    ``cache.negative.ttl.sec`` (1: how long "not found" answers are remembered).

    Every operation below behaves the same way on the wire:

    * **Retries and fail-over**: an attempt that never reached a server (connection refused,
      DNS, connect timeout) is retried for every call; one that may have reached it (no
      answer in time, a dropped connection, HTTP 408, 429, 5xx) for every call but DELETEs,
      whose repeat could hide an applied first try (registering is retried, as
      confluent-kafka does: the registry answers a repeated registration with the same id).
      Each URL gets ``max.retries`` retries with jittered exponential backoff (from
      ``retries.wait.ms``, doubling up to ``retries.max.wait.ms``), then the next ``url``
      is tried. Other error answers are raised at once.
    * **Timeouts**: ``connect.timeout.ms`` (10000) bounds opening each connection,
      ``timeout`` (seconds, 30) each read and write of an attempt, and ``total.timeout.ms``
      (30000) one REST call in all: attempts, backoff sleeps and fail-over stop when it is
      spent. So one slow answer gets its 30 s, while a URL that never answers (a wrong port
      on a silent listener) fails after 30 s instead of 4 x 30 s. An operation that needs
      several calls (a schema with references) makes them one after the other.
    * **Errors**: every operation raises :class:`~kontrakt.errors.SchemaRegistryError` (with
      ``http_status_code``, ``error_code`` and ``error_message``), as the most specific
      subclass for the registry's error code; the ``Raises`` section of each operation lists
      the ones it is expected to meet. :class:`RegistryConnectionError` (a subclass) means
      no URL answered.
    * **Coalescing**: identical reads and lookups in flight at the same time share one HTTP
      request (and its answer or error).

    Args:
        config: the properties above.
        **options: the same properties as snake_case keywords (``basic_auth_user_info=``).

    Raises:
        ConfigError: unknown or invalid property.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **options: Any) -> None:
        super().__init__(config, options)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the HTTP connections (idempotent)."""
        self._http.close()

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
