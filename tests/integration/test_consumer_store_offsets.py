"""store_offsets() and enable.auto.offset.store (confluent-kafka's names), on Tansu, over
the four consumer forms.

- Default (auto store on): a stored offset lets the timed auto commit cover records of the
  latest poll before the application polls again.
- enable.auto.offset.store=false: auto commit, close() and commit() without offsets commit
  only what the application stored.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import Consumer
from kontrakt.errors import IllegalStateError, InvalidArgumentError
from kontrakt.testing import TansuBroker
from tests.integration.test_consumer_close import FORMS, Driver, _config
from tests.integration.test_groups import _fill

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster, pytest.mark.timeout(60)]

RECORDS = 20


def _committed(bs: str, group: str, tp: TopicPartition) -> int | None:
    with Consumer(bootstrap_servers=bs, group_id=group) as checker:
        om = checker.committed([tp], timeout=10)[tp]
    return None if om is None else om.offset


@pytest.mark.parametrize("form", FORMS)
def test_only_stored_offsets_are_committed_without_auto_store(
        tansu_broker: TansuBroker, topic_name: str, form: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    tp = TopicPartition(topic_name, 0)
    group = f"g-{topic_name}"

    async def main() -> None:
        await _fill(bs, topic_name, 1, RECORDS)
        d = Driver(form, **_config(bs, topic_name, enable_auto_offset_store=False,
                                   auto_commit_interval_ms=20))
        await d.call("subscribe", [topic_name])
        records = await d.consume(RECORDS)
        with pytest.raises(InvalidArgumentError):
            await d.call("store_offsets")
        with pytest.raises(IllegalStateError):
            await d.call("store_offsets", offsets={TopicPartition(topic_name, 7): 1})
        await d.call("commit")
        assert _committed(bs, group, tp) is None  # nothing stored, nothing committed
        await d.call("store_offsets", records[:5])
        await d.call("commit")
        assert _committed(bs, group, tp) == 5
        await d.call("store_offsets", offsets={tp: 12})
        await d.call("close")  # the final auto commit: what was stored, not the position

    asyncio.run(main())
    assert _committed(bs, group, tp) == 12


@pytest.mark.parametrize("form", FORMS)
def test_a_stored_offset_is_auto_committed_before_the_next_poll(
        tansu_broker: TansuBroker, topic_name: str, form: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    tp = TopicPartition(topic_name, 0)
    group = f"g-{topic_name}"

    async def main() -> None:
        await _fill(bs, topic_name, 1, RECORDS)
        d = Driver(form, **_config(bs, topic_name, auto_commit_interval_ms=20))
        await d.call("subscribe", [topic_name])
        batch = await d.consume(10, max_records=10)
        await d.call("store_offsets", batch[:4])
        # No poll from here on: the timed commit may cover what was stored, nothing more.
        deadline = time.monotonic() + 10
        while (got := _committed(bs, group, tp)) != 4:
            assert got in (None, 0), got
            assert time.monotonic() < deadline, f"committed {got}"
            await asyncio.sleep(0.05)  # the consumer's own timer: nothing to await here
        await d.call("close")

    asyncio.run(main())
    assert _committed(bs, group, tp) == 10
