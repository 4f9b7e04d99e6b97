"""The dedicated coordinator connection of :class:`AsyncKafkaClient`, against a crafted peer.

The peer (:class:`FakeBroker`) answers one connection's requests in order, as a broker
does, and FindCoordinator with itself (node 1).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.client import COORDINATOR_ID_BASE
from kontrakt.protocol.messages import FindCoordinatorResponse
from tests._crafted_broker import FakeBroker

FIND_COORDINATOR = 10


def _finder(broker: list[FakeBroker]) -> Any:
    def find(version: int, req: Any) -> Any:
        return FindCoordinatorResponse(error_code=0, node_id=1, host="127.0.0.1",
                                       port=broker[0].port)
    return find


async def _until_closed(conn: Any) -> None:
    deadline = time.monotonic() + 5
    while conn.connected:
        assert time.monotonic() < deadline, f"{conn!r} still open"
        await asyncio.sleep(0.01)


def test_coordinator_connection_is_its_own_and_closed_with_the_client() -> None:
    holder: list[FakeBroker] = []

    async def main() -> None:
        async with FakeBroker({"t": 1}, {FIND_COORDINATOR: _finder(holder)},
                              versions={FIND_COORDINATOR: (0, 3)}) as broker:
            holder.append(broker)
            client = AsyncKafkaClient(bootstrap_servers=broker.bootstrap)
            await client.start()
            shared = await client.connection(1)
            dedicated = await client.coordinator_connection("g")
            assert dedicated is not shared
            assert dedicated.connected and shared.connected
            assert dedicated.node_id == COORDINATOR_ID_BASE - 1
            # Cached: the same connection again, and the same for another group there.
            assert await client.coordinator_connection("g") is dedicated
            assert await client.coordinator_connection("g2") is dedicated
            # Ordinary requests to the broker keep their own connection.
            assert await client.connection(1) is shared
            # Forgetting one group keeps the connection the other one still uses...
            client.forget_coordinator("g2")
            await asyncio.sleep(0)
            assert dedicated.connected
            # ...forgetting the last one closes it; the next call opens a new one.
            client.forget_coordinator("g")
            await _until_closed(dedicated)
            assert shared.connected
            again = await client.coordinator_connection("g")
            assert again is not dedicated and again is not shared and again.connected
            finds = [m for k, _v, m in broker.requests if k == FIND_COORDINATOR]
            assert len(finds) == 3  # g, g2, g after being forgotten
            await client.close()
            assert not again.connected and not shared.connected

    asyncio.run(main())


def test_transaction_coordinator_lookup_does_not_close_a_group_connection() -> None:
    holder: list[FakeBroker] = []

    async def main() -> None:
        async with FakeBroker({"t": 1}, {FIND_COORDINATOR: _finder(holder)},
                              versions={FIND_COORDINATOR: (0, 3)}) as broker:
            holder.append(broker)
            async with AsyncKafkaClient(bootstrap_servers=broker.bootstrap) as client:
                dedicated = await client.coordinator_connection("g")
                assert await client.coordinator("tx", "transaction") == 1
                client.forget_coordinator("tx", "transaction")
                await asyncio.sleep(0.05)
                assert dedicated.connected
                assert await client.coordinator_connection("g") is dedicated

    asyncio.run(main())
