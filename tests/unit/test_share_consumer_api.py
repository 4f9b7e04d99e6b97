"""The share consumer's checks that need no broker: configuration, misuse, lifecycle."""

from __future__ import annotations

import asyncio

import pytest

from kontrakt import AcknowledgeType, AsyncShareConsumer, ShareConsumer
from kontrakt._types import ConsumerRecord, TimestampType
from kontrakt.errors import ConfigError, IllegalStateError, InvalidArgumentError

BOOTSTRAP = "127.0.0.1:9"  # nothing listens: none of these calls may need a broker


def test_group_id_is_required_and_unknown_options_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"group\.id"):
        AsyncShareConsumer(bootstrap_servers=BOOTSTRAP)
    with pytest.raises(ConfigError, match=r"share\.acknowledgement\.mode"):
        AsyncShareConsumer(bootstrap_servers=BOOTSTRAP, group_id="g",
                           share_acknowledgement_mode="sometimes")
    with pytest.raises(ConfigError, match="unknown configuration key"):
        AsyncShareConsumer(bootstrap_servers=BOOTSTRAP, group_id="g", enable_auto_commit=True)


def test_misuse_is_refused_without_touching_the_network() -> None:
    record = ConsumerRecord("t", 0, 5, 0, TimestampType.CREATE_TIME, None, b"v")

    async def main() -> None:
        implicit = AsyncShareConsumer(bootstrap_servers=BOOTSTRAP, group_id="g")
        with pytest.raises(IllegalStateError, match="subscribe"):
            await implicit.poll(0)
        with pytest.raises(IllegalStateError, match="explicit"):
            implicit.acknowledge(record)
        with pytest.raises(InvalidArgumentError):
            implicit.subscribe([])
        await implicit.close()
        with pytest.raises(IllegalStateError, match="closed"):
            implicit.subscribe(["t"])
        explicit = AsyncShareConsumer(bootstrap_servers=BOOTSTRAP, group_id="g",
                                      share_acknowledgement_mode="explicit")
        with pytest.raises(IllegalStateError, match="not held"):
            explicit.acknowledge(record, AcknowledgeType.RELEASE)
        assert explicit.delivery_count(record) is None
        await explicit.close()

    asyncio.run(main())


def test_blocking_form_refuses_calls_after_close() -> None:
    consumer = ShareConsumer({"bootstrap.servers": BOOTSTRAP, "group.id": "g"})
    assert consumer.subscription() == []
    consumer.close()
    consumer.close()  # idempotent
    with pytest.raises(IllegalStateError, match="closed"):
        consumer.poll(0)


def test_deserializing_forms_take_their_deserializers_and_check_them() -> None:
    # The (de)serializer keys are taken out before the share consumer's options are
    # checked (a share consumer alone refuses them), and must be callable; the
    # acknowledgement commit callback too. Broken variant tried: the async form not taking
    # them out with split_serdes (a non-callable deserializer is not refused).
    from kontrakt import AsyncDeserializingShareConsumer, DeserializingShareConsumer
    from kontrakt.serde import StringDeserializer

    with pytest.raises(ConfigError, match=r"value\.deserializer.*DeserializingShareConsumer"):
        AsyncShareConsumer({"bootstrap.servers": BOOTSTRAP, "group.id": "g",
                            "value.deserializer": StringDeserializer()})
    with pytest.raises(ConfigError, match="callable"):
        AsyncDeserializingShareConsumer(bootstrap_servers=BOOTSTRAP, group_id="g",
                                        value_deserializer="utf-8")

    async def main() -> None:
        consumer = AsyncDeserializingShareConsumer(
            {"bootstrap.servers": BOOTSTRAP, "group.id": "g",
             "value.deserializer": StringDeserializer()})
        with pytest.raises(InvalidArgumentError, match="callable"):
            consumer.set_acknowledgement_commit_callback("print")  # type: ignore[arg-type]
        assert consumer.metrics()["records-consumed-total"] == 0
        await consumer.close()

    asyncio.run(main())
    with DeserializingShareConsumer(bootstrap_servers=BOOTSTRAP, group_id="g",
                                    key_deserializer=StringDeserializer()) as sync:
        with pytest.raises(InvalidArgumentError, match="callable"):
            sync.set_acknowledgement_commit_callback(42)  # type: ignore[arg-type]
        assert sync.metrics()["assigned-partitions"] == 0


def test_a_dropped_share_consumer_with_a_callback_ends_its_loop_thread() -> None:
    # The loop holds the acknowledgement commit callback's queue, not the ShareConsumer:
    # dropping it still ends its loop thread. Broken variant tried: the loop handed a
    # bound method of the ShareConsumer (the thread outlives it).
    import gc
    import threading
    import time

    from kontrakt import DeserializingShareConsumer

    for cls in (ShareConsumer, DeserializingShareConsumer):
        gc.collect()
        before = set(threading.enumerate())
        consumer = cls(bootstrap_servers=BOOTSTRAP, group_id="g")
        consumer.set_acknowledgement_commit_callback(lambda offsets, error: None)
        assert set(threading.enumerate()) - before
        del consumer
        deadline = time.monotonic() + 10
        while set(threading.enumerate()) - before and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.02)
        assert not set(threading.enumerate()) - before, cls.__name__
