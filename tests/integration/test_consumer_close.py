"""Closing a group consumer (Tansu; session.timeout.ms 1000, see TEST-BROKERS.md).

- The revoke listener runs while the consumer still works, so the documented pattern —
  commit the final offsets in ``on_partitions_revoked`` — commits them during ``close()``.
- ``close(timeout=)`` is bounded with every broker gone: the auto commit, the listener's
  own commit (which gets a typed KafkaTimeoutError) and leaving the group all stop at it.
- With auto commit, ``close()`` commits every record handed out; leaving a ``with`` block
  on an exception commits only what the application moved past by polling again.

Each Tansu test runs over the four consumer forms: Consumer, AsyncConsumer and their
Deserializing wrappers; the bound is also checked on librdkafka's mock cluster with every
broker down, for both group protocols.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.serializing import AsyncDeserializingConsumer, DeserializingConsumer
from kontrakt.errors import InvalidArgumentError, KafkaTimeoutError, KontraktError
from kontrakt.testing import MockCluster, TansuBroker
from tests.integration.test_groups import _fill

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster, pytest.mark.timeout(60)]

FORMS: dict[str, Callable[..., Any]] = {
    "Consumer": Consumer, "AsyncConsumer": AsyncConsumer,
    "DeserializingConsumer": DeserializingConsumer,
    "AsyncDeserializingConsumer": AsyncDeserializingConsumer,
}
PARTITIONS, PER_PARTITION = 2, 20


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Driver:
    """One consumer form, driven the same way from a coroutine (sync forms are called
    directly: their calls block this test's own loop, which runs nothing else)."""

    def __init__(self, form: str, **config: Any) -> None:
        self.consumer = FORMS[form](**config)
        self.is_async = form.startswith("Async")

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return await _maybe(getattr(self.consumer, name)(*args, **kwargs))

    async def consume(self, count: int, max_records: int | None = None) -> list[Any]:
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < count:
            assert time.monotonic() < deadline, f"stalled after {len(got)} records"
            batch = await self.call("getmany", timeout=0.2,
                                    max_records=max_records or count - len(got))
            for recs in batch.values():
                got.extend(recs)
        return got

    def committing_listener(self, outcomes: list[Any]) -> Any:
        """A listener committing in on_partitions_revoked; records what the commit did."""
        consumer = self.consumer
        if self.is_async:
            class AsyncListener:
                async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                    try:
                        await consumer.commit(timeout=10)
                        outcomes.append(("committed", frozenset(parts)))
                    except Exception as exc:
                        outcomes.append(exc)

                def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                    pass
            return AsyncListener()

        class SyncListener:
            def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                try:
                    consumer.commit(timeout=10)
                    outcomes.append(("committed", frozenset(parts)))
                except Exception as exc:
                    outcomes.append(exc)

            def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                pass
        return SyncListener()


def _config(bs: str, topic: str, **extra: Any) -> dict[str, Any]:
    return dict(bootstrap_servers=bs, group_id=f"g-{topic}", auto_offset_reset="earliest",
                session_timeout_ms=1000, heartbeat_interval_ms=100, fetch_max_wait_ms=100,
                **extra)


def _committed(bs: str, topic: str) -> dict[int, int | None]:
    with Consumer(bootstrap_servers=bs, group_id=f"g-{topic}") as checker:
        got = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                timeout=10)
    return {tp.partition: (om.offset if om is not None else None) for tp, om in got.items()}


@pytest.mark.parametrize("form", FORMS)
def test_revoke_listener_commits_during_close(tansu_broker: TansuBroker, topic_name: str,
                                              form: str) -> None:
    tansu_broker.create_topic(topic_name, PARTITIONS)
    bs = tansu_broker.bootstrap_servers

    async def main() -> None:
        await _fill(bs, topic_name, PARTITIONS, PER_PARTITION)
        d = Driver(form, **_config(bs, topic_name, enable_auto_commit=False))
        outcomes: list[Any] = []
        await d.call("subscribe", [topic_name], listener=d.committing_listener(outcomes))
        await d.consume(PARTITIONS * PER_PARTITION)
        await d.call("close")
        everything = frozenset(TopicPartition(topic_name, p) for p in range(PARTITIONS))
        assert outcomes == [("committed", everything)]

    asyncio.run(main())
    assert _committed(bs, topic_name) == {p: PER_PARTITION for p in range(PARTITIONS)}


@pytest.mark.parametrize("form", FORMS)
def test_close_timeout_is_bounded_with_every_broker_gone(
        tansu_broker_factory: Callable[..., TansuBroker], topic_name: str, form: str) -> None:
    broker = tansu_broker_factory(stop_timeout=0.2)  # gone at once: SIGKILL after 0.2 s
    broker.create_topic(topic_name, PARTITIONS)
    bs = broker.bootstrap_servers

    async def main() -> None:
        await _fill(bs, topic_name, PARTITIONS, PER_PARTITION)
        d = Driver(form, **_config(bs, topic_name))
        outcomes: list[Any] = []
        await d.call("subscribe", [topic_name], listener=d.committing_listener(outcomes))
        await d.consume(PARTITIONS * PER_PARTITION)
        broker.stop()
        with pytest.raises(InvalidArgumentError):
            await d.call("close", timeout=-1)
        started = time.monotonic()
        await d.call("close", timeout=1.0)
        took = time.monotonic() - started
        assert took < 2.5, f"close(timeout=1.0) took {took:.1f}s with the broker gone"
        # The listener ran, and its commit failed with a typed error, within the bound.
        assert len(outcomes) == 1 and isinstance(outcomes[0], KafkaTimeoutError), outcomes
        assert isinstance(outcomes[0], KontraktError)
        await d.call("close", timeout=1.0)  # idempotent

    asyncio.run(main())


@pytest.mark.parametrize("form", FORMS)
def test_close_commits_everything_but_an_error_exit_only_what_was_polled_past(
        tansu_broker: TansuBroker, topic_name: str, form: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    per = 2 * 10

    async def run(group: str, fail: bool) -> int | None:
        d = Driver(form, **_config(bs, topic_name, auto_commit_interval_ms=60_000,
                                   ) | {"group_id": group})
        await d.call("subscribe", [topic_name])

        async def body() -> None:
            first = await d.consume(10, max_records=10)   # processed: the next poll says so
            second = await d.consume(10, max_records=10)  # handed out, then the failure
            assert [r.offset for r in first + second] == list(range(per))
            if fail:
                raise RuntimeError("processing failed")

        with pytest.raises(RuntimeError) if fail else contextlib.nullcontext():
            if d.is_async:
                async with d.consumer:
                    await body()
            else:
                with d.consumer:
                    await body()
        tp = TopicPartition(topic_name, 0)
        with Consumer(bootstrap_servers=bs, group_id=group) as checker:
            om = checker.committed([tp], timeout=10)[tp]
        return None if om is None else om.offset

    async def main() -> None:
        await _fill(bs, topic_name, 1, per)
        assert await run(f"g-{topic_name}-clean", fail=False) == per
        assert await run(f"g-{topic_name}-failed", fail=True) == 10

    asyncio.run(main())


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_close_timeout_is_bounded_with_every_mock_broker_down(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str,
        group_protocol: str) -> None:
    """The same bound on librdkafka's mock cluster (three brokers, all set down), for both
    group protocols: KIP-848 leaves with a ConsumerGroupHeartbeat, classic with
    LeaveGroup."""
    cluster = mock_cluster_factory(3)
    cluster.create_topic(topic_name, PARTITIONS)
    cluster.group_initial_rebalance_delay_ms(0)
    cluster.group_consumer_heartbeat_interval_ms(200)
    bs = cluster.bootstrap_servers

    async def main() -> None:
        await _fill(bs, topic_name, PARTITIONS, PER_PARTITION)
        d = Driver("AsyncConsumer", **_config(bs, topic_name, group_protocol=group_protocol)
                   | {"session_timeout_ms": 1500})
        c = d.consumer
        outcomes: list[Any] = []

        class Listener:  # commits, then looks the committed offsets up
            async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                for step in (c.commit(timeout=10), c.committed(parts, timeout=10)):
                    try:
                        await step
                    except Exception as exc:
                        outcomes.append(exc)

        await d.call("subscribe", [topic_name], listener=Listener())
        await d.consume(PARTITIONS * PER_PARTITION)
        for broker in range(1, cluster.num_brokers + 1):
            cluster.broker_down(broker)
        started = time.monotonic()
        await d.call("close", timeout=1.0)
        took = time.monotonic() - started
        assert took < 2.5, f"close(timeout=1.0) took {took:.1f}s with every broker down"
        assert [type(e) for e in outcomes] == [KafkaTimeoutError] * 2, outcomes

    asyncio.run(main())
