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
