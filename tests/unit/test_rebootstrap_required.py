"""KIP-1102's REBOOTSTRAP_REQUIRED: a Metadata response (v13+) whose top-level error code
says the client's view of the cluster is beyond repair sends the client back to
``bootstrap.servers`` at once, without waiting for ``metadata.recovery.rebootstrap.trigger.ms``.

Two crafted peers on 127.0.0.1 (tests/_crafted_broker.py): the bootstrap server ``boot``
advertises one broker, node 1 at ``known``'s port, and closes each connection after its
Metadata answer (so that the client then talks to node 1, as it would to a real cluster's
brokers). ``known`` answers Metadata with REBOOTSTRAP_REQUIRED when the test says so.

Also here: a broker id that metadata moves to another address gets a new connection, even
when one to the old address is open or still being set up.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt.clients import AsyncKafkaClient
from kontrakt.errors import KafkaConnectionError
from kontrakt.protocol.errors import RebootstrapRequiredError
from kontrakt.protocol.messages import MetadataRequest, MetadataResponse
from tests._crafted_broker import CraftedBroker

pytestmark = pytest.mark.timeout(30)

_METADATA = 3
_REBOOTSTRAP_REQUIRED = RebootstrapRequiredError.code


class Peers:
    """``boot`` and ``known``, and how many Metadata requests each answered."""

    def __init__(self) -> None:
        self.stale = 0  # how many answers of ``known`` are to be REBOOTSTRAP_REQUIRED
        self.known = CraftedBroker({_METADATA: self._known_metadata})
        self.boot = CraftedBroker({_METADATA: self._boot_metadata},
                                  close_after_metadata=True)
        #: where ``boot`` says node 1 is (``known`` unless the test moves it)
        self.node1: CraftedBroker = self.known

    def _cluster(self, **fields: Any) -> MetadataResponse:
        mr = MetadataResponse
        return mr(brokers=[mr.MetadataResponseBroker(node_id=1, host="127.0.0.1",
                                                     port=self.node1.port)],
                  cluster_id="crafted", controller_id=1, topics=[], **fields)

    def _boot_metadata(self, version: int, req: Any) -> MetadataResponse:
        return self._cluster()

    def _known_metadata(self, version: int, req: Any) -> MetadataResponse:
        if self.stale:
            self.stale -= 1
            return MetadataResponse(brokers=[], topics=[], error_code=_REBOOTSTRAP_REQUIRED)
        return self._cluster()

    def metadata_versions(self, peer: CraftedBroker) -> list[int]:
        return [v for k, v, _ in peer.requests if k == _METADATA]


async def _until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def _started(peers: Peers, **config: Any) -> AsyncKafkaClient:
    """A client that bootstrapped from ``boot`` and now routes to node 1 (``known``)."""
    client = AsyncKafkaClient(bootstrap_servers=peers.boot.bootstrap, retry_backoff_ms=10,
                              **config)
    await client.start()
    assert {b.port for b in client.cluster.brokers.values()} == {peers.known.port}
    # boot closed the bootstrap connection after answering: node 1 is next.
    await _until(lambda: client.least_loaded_node() == 1)
    return client


def test_rebootstrap_required_sends_the_client_back_to_the_bootstrap_servers() -> None:
    async def main() -> None:
        peers = Peers()
        async with peers.known, peers.boot:
            # A trigger far away: only the error code can explain a rebootstrap.
            client = await _started(peers, metadata_recovery_rebootstrap_trigger_ms=600_000)
            try:
                await client.refresh_metadata()  # node 1 answers normally
                assert peers.metadata_versions(peers.boot) == [13]
                assert peers.metadata_versions(peers.known) == [13]  # v13: has the field
                peers.stale = 1
                meta = await client.refresh_metadata()
                assert client.rebootstraps == 1
                # The answer after REBOOTSTRAP_REQUIRED came from the bootstrap server.
                assert peers.metadata_versions(peers.known) == [13, 13]
                assert peers.metadata_versions(peers.boot) == [13, 13]
                assert {b.port for b in meta.brokers.values()} == {peers.known.port}
            finally:
                await client.close()

    asyncio.run(main())


def test_without_rebootstrap_the_error_is_the_callers() -> None:
    async def main() -> None:
        peers = Peers()
        async with peers.known, peers.boot:
            client = await _started(peers, metadata_recovery_strategy="none")
            try:
                peers.stale = 1
                with pytest.raises(RebootstrapRequiredError):
                    await client.refresh_metadata()
                assert client.rebootstraps == 0
                assert peers.metadata_versions(peers.boot) == [13]  # never asked again
                # The brokers it knew are still the ones it uses.
                assert {b.port for b in client.cluster.brokers.values()} == {peers.known.port}
            finally:
                await client.close()

    asyncio.run(main())


def test_a_broker_id_at_a_new_address_gets_a_new_connection() -> None:
    """After the rebootstrap the bootstrap server names node 1 at another peer: the open
    connection to the old node 1 (still alive) must not serve the new one."""
    async def main() -> None:
        peers = Peers()
        moved = CraftedBroker({_METADATA: lambda v, req: peers._cluster()})
        async with peers.known, peers.boot, moved:
            client = await _started(peers, metadata_recovery_rebootstrap_trigger_ms=600_000)
            try:
                await client.refresh_metadata()  # over an open connection to node 1
                peers.stale, peers.node1 = 1, moved
                await client.refresh_metadata()
                assert client.rebootstraps == 1
                assert client.broker(1) is not None and client.broker(1).port == moved.port
                before = len(peers.known.requests)
                await client.request(MetadataRequest(topics=[]), node=1)
                assert len(peers.known.requests) == before  # not the old node 1
                assert [k for k, _v, _m in moved.requests] == [_METADATA]
            finally:
                await client.close()

    asyncio.run(main())


class _GatedBroker(CraftedBroker):
    """Answers ApiVersions (the first request of a connection) only once ``gate`` is set:
    a connection to it stays in its setup until then."""

    def __init__(self) -> None:
        super().__init__({})
        self.gate = asyncio.Event()
        self.held = 0  # connections waiting at the gate

    async def _answer(self, key: int, version: int, msg: Any) -> Any:
        if key == 18:
            self.held += 1
            await self.gate.wait()
        return await super()._answer(key, version, msg)


def test_a_connection_still_opening_to_a_moved_broker_is_dropped() -> None:
    """Metadata moves node 1 while a connection to its old address is being set up: that
    connection is closed once it opens (its waiter gets a connection error), and the next
    one goes to the new address."""
    async def main() -> None:
        old, new = _GatedBroker(), CraftedBroker({})
        node1 = [old]

        def boot_metadata(version: int, req: Any) -> MetadataResponse:
            mr = MetadataResponse
            return mr(brokers=[mr.MetadataResponseBroker(node_id=1, host="127.0.0.1",
                                                         port=node1[0].port)],
                      cluster_id="crafted", controller_id=1, topics=[])

        boot = CraftedBroker({_METADATA: boot_metadata})
        async with old, new, boot, AsyncKafkaClient(bootstrap_servers=boot.bootstrap) as client:
            opening = asyncio.ensure_future(client.connection(1))
            await _until(lambda: old.held == 1)
            node1[0] = new
            await client.refresh_metadata()  # over the open bootstrap connection
            old.gate.set()
            with pytest.raises(KafkaConnectionError, match="address changed"):
                await asyncio.wait_for(opening, 5)
            conn = await asyncio.wait_for(client.connection(1), 5)
            assert conn.port == new.port

    asyncio.run(main())


def test_a_caller_waiting_out_the_backoff_of_a_moved_broker_gets_a_pooled_connection() -> None:
    """A caller is waiting out node 1's reconnect backoff when metadata moves node 1: the
    connection it then gets goes to the new address and is the client's own (close()
    closes it), not one made for the state that the move dropped."""
    async def main() -> None:
        with socket.socket() as s:  # a port nothing listens on: connecting is refused
            s.bind(("127.0.0.1", 0))
            dead = s.getsockname()[1]
        new = CraftedBroker({})
        node1 = [dead]

        def boot_metadata(version: int, req: Any) -> MetadataResponse:
            mr = MetadataResponse
            return mr(brokers=[mr.MetadataResponseBroker(node_id=1, host="127.0.0.1",
                                                         port=node1[0])],
                      cluster_id="crafted", controller_id=1, topics=[])

        boot = CraftedBroker({_METADATA: boot_metadata})
        async with new, boot:
            client = AsyncKafkaClient(bootstrap_servers=boot.bootstrap,
                                      reconnect_backoff_ms=800, reconnect_backoff_max_ms=800)
            try:
                await client.start()
                with pytest.raises(KafkaConnectionError):
                    await asyncio.wait_for(client.connection(1), 5)
                waiting = asyncio.ensure_future(client.connection(1))  # sleeps ~0.8 s
                await asyncio.sleep(0.05)
                assert not waiting.done()
                node1[0] = new.port
                await client.refresh_metadata()  # over the open bootstrap connection
                conn = await asyncio.wait_for(waiting, 5)
                assert conn.port == new.port and conn.connected
                assert await asyncio.wait_for(client.connection(1), 5) is conn
            finally:
                await client.close()
            assert not conn.connected

    asyncio.run(main())
