"""The fetcher's delayed wake-ups (node backoff): each one must fire, also after earlier ones
have fired (a stale timer once blocked every later one and fetching stalled for good)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from kontrakt._config import ClientConfig
from kontrakt.clients.consumer._config import CONSUMER_OPTIONS, consumer_settings
from kontrakt.clients.consumer._fetcher import FetchBuffer, Fetcher
from kontrakt.clients.consumer._subscription import SubscriptionState


def _fetcher() -> Fetcher:
    cfg = consumer_settings(ClientConfig(CONSUMER_OPTIONS, None))
    client: Any = object()  # never used: no fetch is planned here
    return Fetcher(client, SubscriptionState(), FetchBuffer(1 << 20), cfg)


def test_every_delayed_wake_fires() -> None:
    async def main() -> None:
        f = _fetcher()
        f._loop = asyncio.get_running_loop()
        f._loop_thread = threading.get_ident()
        woken = f._wake = asyncio.Event()
        for _ in range(3):  # one after another, each after the previous one fired
            f._wake_later(0.01)
            await asyncio.wait_for(woken.wait(), 2)
            woken.clear()
        # A later wake-up does not replace a sooner pending one; a sooner one replaces it.
        f._wake_later(0.01)
        f._wake_later(5)
        await asyncio.wait_for(woken.wait(), 2)
        woken.clear()
        f._wake_later(5)
        f._wake_later(0.01)
        await asyncio.wait_for(woken.wait(), 2)
        assert f._timer is not None
        f._timer.cancel()

    asyncio.run(main())
