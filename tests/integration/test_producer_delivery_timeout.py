"""``delivery.timeout.ms`` is a bound on every record's future: never sooner, and late by at
most a small slack, whatever holds the record up (librdkafka's mock cluster: a broker that
never answers, by RTT injection, or one that is down).

The timeouts are small (delivery 1.5 s, request 1.2 s) to keep the tests fast; the same
runs with delivery 10 s and request 8 s failed every future 10.00 s after its send.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.errors import (
    DeliveryTimeoutError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProduceError,
)
from kontrakt.testing import MockCluster

pytestmark = pytest.mark.integration

DELIVERY = 1.5
REQUEST = 1.2
#: how late past the deadline a future may fail: a pass of the sender, a loop turn
SLACK = 0.3
#: retry backoff up to 1 s: a batch's next attempt can be due past its deadline (the
#: producer used to fail such a batch at once, up to a second early)
CONFIG: dict[str, Any] = {
    "delivery_timeout_ms": int(DELIVERY * 1000), "request_timeout_ms": int(REQUEST * 1000),
    "retry_backoff_ms": 100, "retry_backoff_max_ms": 1000, "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 1000, "linger_ms": 5, "metadata_max_age_ms": 500}
#: a response delay no request outlives
NEVER_MS = 600_000
PRODUCE = 0
INVALID_RECORD = 87


def one_broker(mock_cluster_factory: Any, topic: str) -> MockCluster:
    mc: MockCluster = mock_cluster_factory(1)
    mc.create_topic(topic, 2)
    return mc


async def send_timed(p: AsyncProducer, topic: str, n: int
                     ) -> list[tuple[float, float, list[Any]]]:
    """Send ``n`` records over two partitions; each: (before its batch's first send, after
    its own send, [when it failed, error]) (filled by a done-callback on the loop).

    A record's deadline counts from its batch's creation, its first record's send
    (``delivery.timeout.ms``'s documented meaning, as in the Java client): a record sent
    later into the same batch fails with it, sooner after its own send. A round's records
    to one partition are sent back to back into one batch (or, on a slow machine, into
    batches made later, whose deadlines come later still).
    """
    out: list[tuple[float, float, list[Any]]] = []
    first: dict[tuple[bool, int], float] = {}
    for i in range(n):
        seen: list[Any] = []
        before = time.monotonic()
        batch_start = first.setdefault((i > n // 2, i % 2), before)
        fut = await p.send(topic, b"v%d" % i, partition=i % 2)
        after = time.monotonic()
        fut.add_done_callback(lambda f, seen=seen: seen.extend((time.monotonic(),
                                                                f.exception())))
        out.append((batch_start, after, seen))
        if i == n // 2:
            await asyncio.sleep(0.2)  # a second round of batches, created later
    return out


def assert_bounded(timed: list[tuple[float, float, list[Any]]],
                   cause: type[BaseException] | tuple[type[BaseException], ...]) -> None:
    for before, after, (failed_at, error) in timed:
        assert isinstance(error, DeliveryTimeoutError), error
        # One class for "not delivered in time", which older code catching either of the
        # classes it used to raise still catches.
        assert isinstance(error, KafkaTimeoutError) and isinstance(error, ProduceError)
        assert isinstance(error.__cause__, cause), repr(error.__cause__)
        assert error.cause is error.__cause__
        assert failed_at - before >= DELIVERY, "failed before delivery.timeout.ms"
        assert failed_at - after <= DELIVERY + SLACK, "failed too late"


@pytest.mark.parametrize("idempotent", [True, False])
def test_unanswered_requests_fail_at_the_deadline(mock_cluster_factory: Any, topic_name: str,
                                                  idempotent: bool) -> None:
    """The first request times out after 1.2 s; the resend is still in flight when the
    records' 1.5 s run out: its remaining time is cut (it used to run to 2.4-2.6 s)."""
    mc = one_broker(mock_cluster_factory, topic_name)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mc.bootstrap_servers,
                                 enable_idempotence=idempotent, **CONFIG) as p:
            await p.send_and_wait(topic_name, b"first", partition=0)
            mc.set_rtt(1, NEVER_MS)
            timed = await send_timed(p, topic_name, 10)
            await asyncio.wait_for(p.flush(), DELIVERY + 1 + SLACK)
            assert_bounded(timed, KafkaTimeoutError)

    asyncio.run(main())


def test_unreachable_broker_fails_at_the_deadline_not_before(mock_cluster_factory: Any,
                                                             topic_name: str) -> None:
    """A broker that refuses connections: attempts back off up to 1 s, and the records fail
    at their deadline with the connection error as the cause (they used to fail at ~0.8 s
    with a ProduceError whenever the next backoff reached past the deadline)."""
    mc = one_broker(mock_cluster_factory, topic_name)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mc.bootstrap_servers, **CONFIG) as p:
            await p.send_and_wait(topic_name, b"first", partition=0)
            mc.broker_down(1)
            timed = await send_timed(p, topic_name, 10)
            await asyncio.wait_for(p.flush(), DELIVERY + 1 + SLACK)
            assert_bounded(timed, KafkaConnectionError)
            # The producer outlives the outage: it gets a new producer id while the broker
            # is still down for longer than request.timeout.ms (that used to kill its
            # sender), and delivers again once the broker is back.
            again = await send_timed(p, topic_name, 4)
            await asyncio.wait_for(p.flush(), DELIVERY + 1 + SLACK)
            assert_bounded(again, (KafkaConnectionError, KafkaTimeoutError))
            mc.broker_up(1)
            meta = await asyncio.wait_for(p.send_and_wait(topic_name, b"later", partition=0),
                                          DELIVERY + SLACK)
            assert meta.offset >= 1

    asyncio.run(main())


def test_a_batch_that_only_waited_out_the_reconnect_backoff_has_its_failure_as_cause(
        mock_cluster_factory: Any, topic_name: str) -> None:
    """An idempotent partition's second batch waits for its first (a partition's first
    batch under a producer id goes alone); the first fails at its deadline, and the second
    then spends what is left of its own waiting out the reconnect backoff (here longer
    than the deadlines). Its cause is the failed connection that started that backoff, as
    the first's is, not a bare "no connection" timeout (CI run 72 met that interleaving
    of test_unreachable_broker_fails_at_the_deadline_not_before)."""
    mc = one_broker(mock_cluster_factory, topic_name)
    config = {**CONFIG, "reconnect_backoff_ms": 5000, "reconnect_backoff_max_ms": 5000}

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mc.bootstrap_servers,
                                 enable_idempotence=True, **config) as p:
            await p.send_and_wait(topic_name, b"first", partition=0)
            mc.broker_down(1)
            timed = await send_timed(p, topic_name, 4)  # batches to p1 0.2 s apart
            await asyncio.wait_for(p.flush(), DELIVERY + 1 + SLACK)
            assert_bounded(timed, KafkaConnectionError)

    asyncio.run(main())


def test_sync_producer_futures_fail_at_the_deadline(mock_cluster_factory: Any,
                                                    topic_name: str) -> None:
    mc = one_broker(mock_cluster_factory, topic_name)
    with Producer(bootstrap_servers=mc.bootstrap_servers, **CONFIG) as p:
        p.send(topic_name, b"first", partition=0).result(10)
        mc.set_rtt(1, NEVER_MS)
        before = time.monotonic()
        futs = [p.send(topic_name, b"v%d" % i, partition=i % 2) for i in range(20)]
        after = time.monotonic()
        for fut in futs:
            with pytest.raises(DeliveryTimeoutError) as info:
                fut.result(DELIVERY + 1)
            assert isinstance(info.value.__cause__, KafkaTimeoutError)
        failed_at = time.monotonic()
        assert failed_at - before >= DELIVERY
        assert failed_at - after <= DELIVERY + SLACK
        mc.set_rtt(1, 0)


def test_a_due_bump_waits_for_the_requests_out_without_spinning(mock_cluster_factory: Any,
                                                                topic_name: str) -> None:
    """A batch fails for good (a non-retriable error) while another broker's request is out:
    the new producer id waits for that answer, and the sender sleeps meanwhile (it ran
    ~60,000 passes in that second, retrying the wait for the bump)."""
    mc: MockCluster = mock_cluster_factory(2)
    mc.create_topic(topic_name, 2)
    mc.set_partition_leader(topic_name, 0, 1)
    mc.set_partition_leader(topic_name, 1, 2)
    passes = 0

    async def main() -> None:
        nonlocal passes
        async with AsyncProducer(bootstrap_servers=mc.bootstrap_servers, **CONFIG) as p:
            await p.send_and_wait(topic_name, b"first", partition=0)
            await p.send_and_wait(topic_name, b"first", partition=1)
            sender = p._sender
            assert sender is not None
            mc.broker_push_request_error_rtts(2, PRODUCE, [(0, 1000)])  # answered after 1 s
            slow = await p.send(topic_name, b"slow", partition=1)
            for _ in range(1000):  # until its request is out (after linger.ms)
                if sender._outstanding:
                    break
                await asyncio.sleep(0.001)
            assert sender._outstanding
            mc.broker_push_request_error_rtts(1, PRODUCE, [(INVALID_RECORD, 0)])
            with pytest.raises(ProduceError):
                await p.send_and_wait(topic_name, b"refused", partition=0)
            pass_ = sender._pass

            def counted() -> float:
                nonlocal passes
                passes += 1
                return pass_()

            sender._pass = counted  # type: ignore[method-assign]
            later = await p.send(topic_name, b"later", partition=0)  # wakes the sender
            assert (await slow).offset == 1
            assert (await later).offset == 1
            del sender._pass

    asyncio.run(main())
    assert passes < 50
