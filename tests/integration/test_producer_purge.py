"""purge(): failing buffered records at once, queued or in flight (confluent-kafka's purge).

On librdkafka's mock cluster with an injected round-trip time, so that a request is
provably on its way while it is purged, and with request tracking to see what was sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.errors import ProduceError
from kontrakt.testing import MockCluster

pytestmark = pytest.mark.integration

PRODUCE = 0
VALUE = b"v" * 100


def _produce_requests(mc: MockCluster) -> int:
    return sum(1 for r in mc.get_requests() if r.api_key == PRODUCE)


def test_purge_fails_queued_and_in_flight_records_apart(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str) -> None:
    mc = mock_cluster_factory(1)
    mc.create_topic(topic_name, 3)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mc.bootstrap_servers, linger_ms=30_000,
                                 batch_size=1024) as p:
            await p.send_and_wait(topic_name, b"warm-up", partition=2)
            mc.set_rtt(1, 1000)
            mc.start_request_tracking()
            # Partition 0: a full batch, written at once and in flight for a second.
            flying = [await p.send(topic_name, VALUE, partition=0) for _ in range(8)]
            flying_open = [await p.send(topic_name, VALUE, partition=0) for _ in range(2)]
            # Partition 1: an open batch lingering, and keyed records staged for settling.
            queued = [await p.send(topic_name, VALUE, partition=1) for _ in range(3)]
            staged = [await p.send(topic_name, VALUE, b"key-%d" % i) for i in range(5)]
            for _ in range(100):
                if _produce_requests(mc):
                    break
                await asyncio.sleep(0.01)
            assert _produce_requests(mc) == 1

            assert p.purge(in_queue=False) == 8
            assert all(f.done() for f in flying)
            for f in flying:
                assert isinstance(f.exception(), ProduceError)
                assert "in flight" in str(f.exception())
            assert not any(f.done() for f in flying_open + queued + staged)

            assert p.purge(in_flight=False) == 10
            for f in flying_open + queued + staged:
                assert isinstance(f.exception(), ProduceError)
                assert "queue" in str(f.exception())
            assert len(p._acc.incomplete) == 0 and p._acc.used == 0
            mc.set_rtt(1, 0)
            # The sequence of the purged in-flight batch cannot be trusted: the producer
            # goes on with a new epoch, and its records are delivered.
            after = await p.send_and_wait(topic_name, b"after", partition=0)
            assert after.offset >= 0
        # Nothing purged from the queue was ever sent: one Produce request (the in-flight
        # one) before the last record's.
        assert _produce_requests(mc) == 2

    asyncio.run(main())
    mc.stop_request_tracking()


def test_sync_purge_hands_callbacks_to_poll(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str) -> None:
    mc = mock_cluster_factory(1)
    mc.create_topic(topic_name, 2)
    delivered: list[Any] = []
    with Producer(bootstrap_servers=mc.bootstrap_servers, linger_ms=30_000) as p:
        p.send_and_wait(topic_name, b"warm-up")
        for i in range(6):
            p.produce(topic_name, VALUE, b"k%d" % i, on_delivery=lambda e, m: delivered.append(e))
        assert len(p) == 6
        p.purge()
        assert delivered == []  # callbacks run on poll(), as confluent-kafka's
        assert p.poll(0) == 6
        assert all(isinstance(e, ProduceError) and "queue" in str(e) for e in delivered)
        assert len(p) == 0
        started = time.monotonic()
        assert p.flush(10) == 0
        assert time.monotonic() - started < 1
        # Not blocking: the purge runs on the I/O thread right after.
        p.produce(topic_name, VALUE, b"late", on_delivery=lambda e, m: delivered.append(e))
        p.purge(blocking=False)
        p.flush(10)
        assert len(delivered) == 7 and isinstance(delivered[-1], ProduceError)
        # The producer goes on.
        assert p.send_and_wait(topic_name, b"after", timeout=10).offset >= 0
