"""The client core's metadata: starting (bootstrap and the first metadata), the background
loop that refreshes the cache (every ``metadata.max.age.ms``, or when asked, coalesced to
one request per ``retry.backoff.ms``), and which topics it asks about (a layer of
:class:`~kontrakt.clients.client.AsyncKafkaClient`, over
:class:`~kontrakt.clients._client_connections.ClientConnections`).

A failed refresh at start names every broker tried and why it failed
(NoBrokersAvailableError); the loop is supervised: if it dies, the client's next call
raises its error.

Metadata recovery (``metadata.recovery.strategy=rebootstrap``, KIP-899 and KIP-1102, as
the Java client and librdkafka do it): while metadata is wanted, the client stops asking
the known brokers and loads metadata from ``bootstrap.servers`` again (new connections,
names resolved anew) when every known broker is in its reconnect backoff, when none has
given metadata for ``metadata.recovery.rebootstrap.trigger.ms``, or at once when a
Metadata response (v13+) says REBOOTSTRAP_REQUIRED. That recovers a client whose brokers
were all replaced by others behind the same bootstrap name, which no refresh from the
known ones can find. A broker id that comes back at another address has its old
connection dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from kontrakt.clients._client_connections import Backoff, ClientConnections
from kontrakt.clients._net.security import TlsHandshakeError
from kontrakt.clients._settings import ClientSettings
from kontrakt.clients._wait import wait_event, wait_within
from kontrakt.clients.cluster import BrokerInfo, ClusterMetadata
from kontrakt.errors import (
    AuthenticationError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
)
from kontrakt.protocol.errors import RebootstrapRequiredError, for_code
from kontrakt.protocol.messages import MetadataRequest

__all__ = ["ClientMetadataRefresh"]

log = logging.getLogger("kontrakt.client")


class ClientMetadataRefresh(ClientConnections):
    """Starting, the metadata loop and the topics it tracks."""

    def __init__(self, settings: ClientSettings) -> None:
        super().__init__(settings)
        self._topics: set[str] = set()
        self._all_topics = False
        #: (all topics?, topic names) of the last successful metadata request
        self._last_asked: tuple[bool, frozenset[str]] = (False, frozenset())
        self._metadata_task: asyncio.Task[None] | None = None
        self._refresh_wanted: asyncio.Event | None = None
        self._refresh_waiters: list[asyncio.Future[None]] = []
        #: when metadata was first wanted and not yet obtained (monotonic seconds), for
        #: metadata.recovery.rebootstrap.trigger.ms; None while the last refresh succeeded
        self._metadata_wanted_since: float | None = None
        #: how many times the client rebootstrapped
        self.rebootstraps = 0

    async def start(self, timeout: float | None = None, *,
                    budget_name: str | None = None) -> None:
        """Connect to a bootstrap server and load cluster metadata.

        Args:
            timeout: seconds to keep trying (default ``request.timeout.ms``).
            budget_name: what the error message calls that limit (default
                ``request.timeout.ms=...``), e.g. ``max.block.ms=...`` for a producer.

        Raises:
            NoBrokersAvailableError: no broker answered within the timeout; the message
                names each broker tried and why it failed.
        """
        if self._closed:
            raise IllegalStateError("client is closed")
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        if self._refresh_wanted is None:
            self._refresh_wanted = asyncio.Event()
        await self._refresh_metadata_now(timeout, budget_name)
        if self._closed:
            raise IllegalStateError("client is closed")
        if self._started:  # another caller's start finished first
            return
        self._started = True
        self._metadata_task = self._loop.create_task(self._metadata_loop(),
                                                     name="kontrakt-metadata")

    # --- metadata ---------------------------------------------------------------------

    def add_topics(self, topics: Iterable[str]) -> None:
        """Track these topics' metadata from now on (refreshes when new ones appear)."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self.request_metadata_refresh()

    def track_all_topics(self, enabled: bool = True) -> None:
        """Fetch metadata for every topic in the cluster on each refresh."""
        self._all_topics = enabled

    def request_metadata_refresh(self) -> None:
        """Ask the metadata loop to refresh soon (after retry backoff)."""
        if self._refresh_wanted is not None:
            self._refresh_wanted.set()

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Refresh metadata now (tracking ``topics`` too) and return the cache.

        Raises:
            NoBrokersAvailableError / KafkaTimeoutError: no broker answered in time.
        """
        self._check()
        if topics is not None:
            self._topics |= set(topics)
        if not self._started:
            await self.start()
            return self.cluster
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._refresh_waiters.append(fut)
        self.request_metadata_refresh()
        await fut
        return self.cluster

    async def _refresh_metadata_now(self, timeout: float | None = None,
                                    budget_name: str | None = None) -> None:
        st = self.settings
        if timeout is None:
            timeout = st.request_timeout
            budget_name = budget_name or f"request.timeout.ms={self.config['request.timeout.ms']}"
        deadline = time.monotonic() + timeout
        backoff = Backoff(st.retry_backoff, st.retry_backoff_max)
        #: address -> why it failed last, in the order first tried
        tried: dict[str, str] = {}
        if self._metadata_wanted_since is None:
            self._metadata_wanted_since = time.monotonic()
        while True:
            self._maybe_rebootstrap()
            node = self.least_loaded_node()
            all_topics = self._all_topics
            asked = frozenset(self._topics)
            topics = None if all_topics else [
                MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(asked)]
            req = MetadataRequest(topics=topics, allow_auto_topic_creation=False)
            remaining = max(0.001, deadline - time.monotonic())
            try:
                # Bounded as a whole: connecting has a timeout of its own
                # (socket.connection.setup.timeout.ms) that may be longer.
                resp = await wait_within(
                    self._send(req, node=node, timeout=remaining), remaining)
                if resp.error_code:
                    raise for_code(resp.error_code)("metadata request failed")
                before = self.cluster.brokers
                was = self.cluster.cluster_id
                self.cluster.update(resp, all_topics=all_topics)
                if was is not None and self.cluster.cluster_id not in (None, was):
                    # A rebootstrap (or a bootstrap name moved) reached another cluster:
                    # what the application keeps from the old one (offsets, producer ids,
                    # transactions) means nothing there.
                    log.warning("cluster id changed from %s to %s (brokers now: %s)", was,
                                self.cluster.cluster_id, ",".join(
                                    b.address for b in self.cluster.brokers.values()))
                self._last_asked = (all_topics, asked)
                self._metadata_wanted_since = None
                self._rebootstrapping = False
                self._drop_moved_brokers(before)
                return
            except AuthenticationError:
                # Refused credentials or certificate fail the same way on every retry.
                raise
            except RebootstrapRequiredError:
                # KIP-1102: the broker says this client's view of the cluster is beyond
                # repair. Without rebootstrap the error is the caller's, as any other.
                if not st.rebootstrap:
                    raise
                tried[self._describe_node(node)] = "asked the client to rebootstrap"
                self._rebootstrap("a broker answered REBOOTSTRAP_REQUIRED")
                delay = backoff.next()
                if time.monotonic() + delay >= deadline:
                    raise
                await asyncio.sleep(delay)
            except (KafkaConnectionError, KafkaTimeoutError, asyncio.TimeoutError,
                    TimeoutError) as exc:
                address = self._describe_node(node)
                # A plain TimeoutError is this loop's own deadline cutting an attempt short:
                # it says less than an earlier failure of the same broker (e.g. a TLS error).
                if address not in tried or isinstance(exc, KafkaError) \
                        or not isinstance(exc, TimeoutError):
                    tried[address] = _reason(exc, remaining)
                delay = backoff.next()
                if time.monotonic() + delay >= deadline:
                    raise NoBrokersAvailableError(
                        f"no broker reachable within {budget_name or f'{timeout}s'}: "
                        + ", ".join(f"{addr} ({why})" for addr, why in tried.items())
                    ) from exc
                await asyncio.sleep(delay)

    def _maybe_rebootstrap(self) -> None:
        """Rebootstrap if metadata recovery is on, a broker is known, and every known broker
        is in its reconnect backoff (KIP-899) or none has given metadata for
        ``metadata.recovery.rebootstrap.trigger.ms`` (KIP-1102)."""
        st = self.settings
        if not st.rebootstrap or not self.cluster.brokers or self._rebootstrapping:
            return
        if self._all_known_brokers_unavailable():
            self._rebootstrap("no known broker is available")
            return
        since = self._metadata_wanted_since
        if since is not None and time.monotonic() - since >= st.rebootstrap_trigger:
            self._rebootstrap(f"no metadata for metadata.recovery.rebootstrap.trigger.ms="
                              f"{self.config['metadata.recovery.rebootstrap.trigger.ms']}")

    def _rebootstrap(self, why: str) -> None:
        """Load metadata from the bootstrap servers again, on new connections (their names
        resolved anew): until it comes, requests any broker can answer go to them, not to
        the known brokers. Requests for a given broker (a leader's) still go to the address
        it had: if it is gone, they fail as before and report why, and the new metadata
        replaces the address (:meth:`_drop_moved_brokers`)."""
        # INFO, as the Java client: with the KIP-899 rule a one-broker cluster's restart
        # rebootstraps too, and the failed connections were logged already.
        log.info("rebootstrapping from bootstrap.servers %s: %s (known brokers: %s)",
                 ",".join(f"{h}:{p}" for h, p in self._bootstrap), why,
                 ",".join(b.address for b in self.cluster.brokers.values()) or "none")
        self._rebootstrapping = True
        for node_id in [n for n in self._nodes if n < 0]:
            self._drop_node(node_id)
        self.rebootstraps += 1
        # The trigger counts again from here: the bootstrap servers get their own
        # request.timeout.ms-bounded tries, as at start.
        self._metadata_wanted_since = time.monotonic()

    def _describe_node(self, node: int) -> str:
        try:
            host, port = self._address_of(node)
        except KafkaConnectionError:
            return f"node {node}"
        return f"{host}:{port}"

    def _asks_new_topics(self) -> bool:
        all_topics, asked = self._last_asked
        if all_topics:
            return False
        return self._all_topics or not self._topics <= asked

    async def _metadata_loop(self) -> None:
        assert self._refresh_wanted is not None
        max_age = self.settings.metadata_max_age
        min_gap = self.settings.retry_backoff
        try:
            while True:
                age = time.monotonic() - self.cluster.updated_at
                await wait_event(self._refresh_wanted, max(0.0, max_age - age))
                # Coalesce bursts of refresh requests (e.g. many partitions losing their
                # leader at once) into one request per retry.backoff.ms. A refresh for topics
                # the last one did not ask about is not a repeat: it goes at once (a consumer
                # subscribing right after start must not wait out the gap to join).
                gap = min_gap - (time.monotonic() - self.cluster.updated_at)
                if gap > 0 and not self._asks_new_topics():
                    await asyncio.sleep(gap)
                self._refresh_wanted.clear()
                waiters, self._refresh_waiters = self._refresh_waiters, []
                try:
                    await self._refresh_metadata_now()
                except KafkaError as exc:
                    log.warning("metadata refresh failed: %s", exc)
                    for w in waiters:
                        if not w.done():
                            w.set_exception(exc)
                    continue
                for w in waiters:
                    if not w.done():
                        w.set_result(None)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # supervised: surfaced at the next call
            log.exception("metadata loop died")
            self._bg_error = exc

    def broker(self, node_id: int) -> BrokerInfo | None:
        """The advertised broker for ``node_id``."""
        return self.cluster.brokers.get(node_id)


def _reason(exc: BaseException, waited: float) -> str:
    """Why a broker could not be used, in a few words (for NoBrokersAvailableError)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, TlsHandshakeError):  # its message says what to check
            return str(cause)
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError) \
                and cause.strerror:
            return cause.strerror.lower()
        cause = cause.__cause__
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer within {waited:.3g}s"
    return str(exc)
