"""Full batches wait for the broker's in-flight request, at most until their linger deadline.

A pure-Python request costs more than the batch inside it, so the sender does not write a
request per filled batch while one to the same broker is on its way: the batches filling
meanwhile go out together when its response arrives. ``linger.ms`` still bounds how long a
batch waits. Both are shown on librdkafka's mock cluster with a slow broker (injected RTT),
counting and timing the Produce requests it receives.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt.clients._net.connection import BrokerConnection
from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.clients.producer._sender import Sender
from kontrakt.errors import KafkaTimeoutError
from kontrakt.protocol.messages import ProduceRequest
from kontrakt.testing import MockCluster

pytestmark = pytest.mark.integration

PRODUCE = 0
VALUE = b"v" * 100


def _produce_requests(mc: MockCluster) -> list[int]:
    return [r.timestamp_us for r in mc.get_requests() if r.api_key == PRODUCE]


def _single_broker(factory: Callable[..., MockCluster], topic: str,
                   partitions: int) -> MockCluster:
    mc = factory(1)
    mc.create_topic(topic, partitions)
    return mc


def _slow_down(mc: MockCluster, rtt_ms: int) -> None:
    # Only once the producer is connected and warm: start-up requests stay fast.
    mc.set_rtt(1, rtt_ms)
    mc.start_request_tracking()


def test_full_batches_share_one_request_while_another_is_in_flight(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str) -> None:
    mc = _single_broker(mock_cluster_factory, topic_name, 8)

    async def run() -> list[int]:
        async with AsyncProducer(bootstrap_servers=mc.bootstrap_servers, linger_ms=5000,
                                 batch_size=1024) as p:
            await p.send_and_wait(topic_name, b"warm-up", partition=0)
            _slow_down(mc, 300)
            # 12 records of ~110 bytes per partition: a full 1 KB batch and an open one.
            futs = [await p.send(topic_name, VALUE, partition=part)
                    for part in range(8) for _ in range(12)]
            await asyncio.sleep(0.15)
            counts = [len(_produce_requests(mc))]  # the first full batch only
            await asyncio.sleep(0.5)
            counts.append(len(_produce_requests(mc)))  # + the other seven, together
            await p.flush()
            for f in futs:
                await f
            counts.append(len(_produce_requests(mc)))  # + the eight open batches
            assert p.metrics()["batch-send-total"] == 1 + 8 + 8
            return counts

    counts = asyncio.run(run())
    mc.stop_request_tracking()
    # Without holding, each full batch would have had its own request at once.
    assert counts == [1, 2, 3]


def test_a_held_full_batch_goes_out_at_its_linger_deadline(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str) -> None:
    mc = _single_broker(mock_cluster_factory, topic_name, 2)

    async def run() -> None:
        async with AsyncProducer(bootstrap_servers=mc.bootstrap_servers, linger_ms=100,
                                 batch_size=1024) as p:
            await p.send_and_wait(topic_name, b"warm-up", partition=0)
            _slow_down(mc, 1500)
            # Fill a batch of partition 0 (sent at once: nothing in flight), then one of
            # partition 1 (held: the first request waits out the RTT).
            futs = [await p.send(topic_name, VALUE, partition=0) for _ in range(12)]
            futs += [await p.send(topic_name, VALUE, partition=1) for _ in range(12)]
            # Awaiting would make the batches urgent; give the sender time instead.
            await asyncio.sleep(0.6)
            await p.flush()
            for f in futs:
                await f

    asyncio.run(run())
    requests = _produce_requests(mc)
    mc.stop_request_tracking()
    assert len(requests) >= 2, requests
    # The held batch left after its 100 ms linger, not after the 1.5 s response.
    gap_ms = (requests[1] - requests[0]) / 1000
    assert 50 <= gap_ms < 600, gap_ms


def test_a_sync_hand_over_releases_its_caller_before_the_passs_last_write(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A sync producer's caller whose records filled batches waits in Sender.hand_over for
    # the sender's pass. It goes on once the pass's last request is made, so its Python
    # overlaps that request's socket write (which does not hold the GIL); not sooner,
    # or the pass's other requests would wait for the GIL the caller took back. Shown by
    # spying on the Produce writes of passes that go to all three brokers at once.
    mc = mock_cluster_factory(3)
    mc.create_topic(topic_name, 6)
    writes: list[tuple[bool, bool, int]] = []  # (caller waiting, caller released, left)
    sender: Any = None
    original = BrokerConnection.send_encoded_nowait

    def spy(self: BrokerConnection, api_key: int, *args: Any) -> Any:
        if api_key == ProduceRequest.API_KEY and sender is not None:
            handover = sender.handover
            writes.append((handover._handing, handover._passed.is_set(), sender._writes_left))
        return original(self, api_key, *args)

    monkeypatch.setattr(BrokerConnection, "send_encoded_nowait", spy)
    with Producer(bootstrap_servers=mc.bootstrap_servers, linger_ms=5000,
                  batch_size=1024) as p:
        p.send_and_wait(topic_name, b"warm-up")
        sender = p._async._sender
        futs = [p.send(topic_name, VALUE, b"key-%06d" % i) for i in range(20_000)]
        p.flush()
        assert all(f.exception() is None for f in futs)
    # Never a write while the caller still waits with no request after it.
    assert not [w for w in writes if w[0] and w[2] == 0], writes
    # Passes writing to several brokers for a waiting caller: it waited through the first
    # writes and was released at the last one.
    waited = [i for i, w in enumerate(writes) if w[0] and w[2] > 0]
    assert waited, writes
    for i in waited:
        last = next(j for j in range(i, len(writes)) if writes[j][2] == 0)
        assert writes[last][:2] == (False, True), writes[i:last + 1]


def test_a_response_with_nothing_left_to_send_runs_no_send_pass(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each awaited send kicks one pass that writes its request; its response wakes the
    # sender only when a batch waits for it. An idle pass there would run before the
    # awaiting caller resumes (and hold a sync caller's GIL), adding to every round trip.
    # A pass whose one round took every ready batch does not drain the queues again.
    mc = _single_broker(mock_cluster_factory, topic_name, 3)
    calls = Counter[str]()

    def counting(name: str) -> Any:
        original = getattr(Sender, name)

        def counted(self: Sender, *args: Any) -> Any:
            calls[name] += 1
            return original(self, *args)
        return counted

    async def run() -> None:
        async with AsyncProducer(bootstrap_servers=mc.bootstrap_servers, linger_ms=5) as p:
            await p.send_and_wait(topic_name, b"warm-up")
            for name in ("_pass", "_drain"):
                monkeypatch.setattr(Sender, name, counting(name))
            for i in range(40):
                await p.send_and_wait(topic_name, VALUE, b"k%d" % i)

    asyncio.run(run())
    assert 40 <= calls["_pass"] <= 44, calls
    assert calls["_drain"] == calls["_pass"], calls


def test_awaited_single_sends_make_no_timer_and_no_loop_lookup_per_request(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each request in flight is timed out by one timer of the sender's, set for the
    # earliest due: a TimerHandle made and cancelled per request (a heap push, and a
    # cancelled handle left in the loop's heap) added to every awaited send's round trip.
    # The connection writes a request without asyncio.get_running_loop(), which costs a
    # getpid() system call per call.
    mc = _single_broker(mock_cluster_factory, topic_name, 3)
    timers = 0
    lookups: Counter[str] = Counter()

    async def run() -> None:
        nonlocal timers
        loop = asyncio.get_running_loop()
        async with AsyncProducer(bootstrap_servers=mc.bootstrap_servers, linger_ms=5) as p:
            await p.send_and_wait(topic_name, b"warm-up")
            call_at = loop.call_at

            def counted_call_at(*args: Any, **kwargs: Any) -> asyncio.TimerHandle:
                nonlocal timers
                timers += 1
                return call_at(*args, **kwargs)
            get_running_loop = asyncio.get_running_loop

            def counted_lookup() -> asyncio.AbstractEventLoop:
                lookups[sys._getframe(1).f_code.co_filename] += 1
                return get_running_loop()
            monkeypatch.setattr(loop, "call_at", counted_call_at)
            monkeypatch.setattr(asyncio, "get_running_loop", counted_lookup)
            for i in range(40):
                await p.send_and_wait(topic_name, VALUE, b"k%d" % i)
            monkeypatch.undo()

    asyncio.run(run())
    assert timers <= 2, timers
    assert not [f for f in lookups if f.endswith("connection.py")], lookups


@pytest.mark.parametrize("in_flight", [1, 2])
def test_batches_held_by_the_in_flight_limit_go_out_on_the_response(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str,
        in_flight: int) -> None:
    # Full batches beyond max.in.flight.requests.per.connection wait for a response, which
    # wakes the sender for them: they do not wait out their (here 30 s) linger.
    mc = _single_broker(mock_cluster_factory, topic_name, 6)

    async def run() -> None:
        async with AsyncProducer(bootstrap_servers=mc.bootstrap_servers, linger_ms=30_000,
                                 batch_size=1024,
                                 max_in_flight_requests_per_connection=in_flight) as p:
            await p.send_and_wait(topic_name, b"warm-up", partition=0)
            _slow_down(mc, 50)
            # Per partition: a full batch (sent or held) and an open one, lingering.
            full = []
            for part in range(6):
                futs = [await p.send(topic_name, VALUE, partition=part) for _ in range(12)]
                full += futs[:8]
            done, pending = await asyncio.wait([asyncio.ensure_future(f) for f in full],
                                               timeout=10)
            assert not pending, f"{len(pending)} records of full batches still unsent"
            assert all(f.exception() is None for f in done)

    asyncio.run(run())
    mc.stop_request_tracking()


def test_a_sync_send_and_wait_that_times_out_leaves_its_record_to_be_delivered(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str) -> None:
    mc = _single_broker(mock_cluster_factory, topic_name, 1)
    with Producer(bootstrap_servers=mc.bootstrap_servers, linger_ms=5) as p:
        p.send_and_wait(topic_name, b"warm-up")
        _slow_down(mc, 800)
        with pytest.raises(KafkaTimeoutError, match="not delivered within"):
            p.send_and_wait(topic_name, b"slow", timeout=0.1)
        assert p.flush(10) == 0
        # The timed-out record went out once: the next record follows it.
        mc.set_rtt(1, 0)
        after = p.send_and_wait(topic_name, b"after", timeout=10)
        assert after.offset == 2
    mc.stop_request_tracking()
