"""Calls every client offers under the names users of other clients know, written once for
the producers, consumers and admin clients: confluent-kafka's ``cluster_id`` and
``set_sasl_credentials``, kafka-python's ``bootstrap_connected``.

Each takes the client's network core (:class:`~kontrakt.clients.client.AsyncKafkaClient`);
the clients' methods are thin shells that document them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kontrakt.errors import ConfigError, IllegalStateError, KafkaTimeoutError

if TYPE_CHECKING:
    from kontrakt.clients.client import AsyncKafkaClient

__all__ = ["bootstrap_connected", "cluster_id", "set_sasl_credentials"]


async def cluster_id(client: AsyncKafkaClient, timeout: float | None,
                     start: Callable[[], Awaitable[None]] | None = None) -> str | None:
    """The cluster id the brokers report in metadata (KIP-78). A client without metadata
    yet is started first (``start``: the owning client's start, default the core's), for
    at most ``timeout`` seconds (None or negative, librdkafka's -1: as long as the start
    takes, which bounds itself); after a timeout the start goes on.

    Returns:
        The id, or None when the brokers report none (Metadata v0-v1 brokers).

    Raises:
        KafkaTimeoutError: no metadata within ``timeout``.
        NoBrokersAvailableError: the start failed: no broker answered in its time.
    """
    if client.cluster.version == 0:
        # A started client has metadata and keeps the id up to date with each refresh
        # (librdkafka's rd_kafka_clusterid answers from its cache too).
        started = asyncio.ensure_future(client.start() if start is None else start())
        if timeout is None or timeout < 0:
            await started
        else:
            # Not cancelled on timeout: a caller asking again finds it done or nearer.
            started.add_done_callback(_retrieve)
            await asyncio.wait({started}, timeout=timeout)
            if not started.done():
                raise KafkaTimeoutError(f"cluster_id(): no cluster metadata within {timeout}s")
            started.result()
    return client.cluster.cluster_id


def _retrieve(fut: asyncio.Future[None]) -> None:
    # An abandoned start's error is the next call's (it starts again), not the loop's.
    if not fut.cancelled():
        fut.exception()


def set_sasl_credentials(client: AsyncKafkaClient, username: str, password: str) -> None:
    """Use ``username`` and ``password`` for the client's next SASL PLAIN / SCRAM logins:
    new connections and re-authentications (KIP-368) of open ones. Open connections stay.
    Brokers refuse a re-authentication as another user, which ends that connection (the
    next one logs in as the new user): a password rotation keeps the user.

    Safe from any thread: the pair is replaced at once, and each login reads it once.

    Raises:
        TypeError: ``username`` or ``password`` is not a ``str``.
        ConfigError: the client does not log in with SASL PLAIN or SCRAM (no SASL, or
            OAUTHBEARER / GSSAPI, which have no password).
        IllegalStateError: the client is closed (confluent-kafka: RuntimeError).
    """
    if client._closed:
        raise IllegalStateError("set_sasl_credentials() on a closed client")
    if not isinstance(username, str) or not isinstance(password, str):
        raise TypeError("set_sasl_credentials(username, password) takes two str, got "
                        f"{type(username).__name__} and {type(password).__name__}")
    sasl = client.settings.connection.sasl
    setter = getattr(sasl, "set_credentials", None)
    if setter is None:
        mechanism = getattr(sasl, "mechanism", None)
        how = ("the client does not use SASL (security.protocol="
               f"{client.config['security.protocol']})" if sasl is None
               else f"sasl.mechanism={mechanism} has no username and password")
        raise ConfigError(f"set_sasl_credentials() applies to SASL PLAIN and SCRAM only: {how}")
    setter(username, password)


def bootstrap_connected(client: AsyncKafkaClient) -> bool:
    """True when the client has loaded metadata from the cluster and has a broker
    connection open now; call it on the client's event loop."""
    return client.cluster.version > 0 and client._has_open_connection()
