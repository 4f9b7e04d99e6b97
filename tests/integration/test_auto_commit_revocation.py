"""The auto commit on revocation covers what the application was handed only once it polls
again (Tansu; session.timeout.ms 2000, see TEST-BROKERS.md).

A rebalance runs in the background, possibly while the application is processing a batch.
The revocation waits for its next poll (at most session.timeout.ms / 2) and then commits
the whole batch, so a polling application gets no duplicates; an application that does
not poll in time (stuck, or about to crash) gets only what it had polled past committed,
so that the batch is read again rather than lost.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.testing import TansuBroker
from tests.integration.test_groups import _fill

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster, pytest.mark.timeout(60)]

SESSION_MS = 2000


@pytest.mark.parametrize("polls", [True, False], ids=["polls-again", "never-polls"])
def test_revocation_commits_the_batch_in_hand_only_after_a_poll(
        tansu_broker: TansuBroker, topic_name: str, polls: bool) -> None:
    tansu_broker.create_topic(topic_name, 1)
    tansu_broker.create_topic(f"{topic_name}-other", 1)
    bs = tansu_broker.bootstrap_servers
    tp = TopicPartition(topic_name, 0)

    async def main() -> None:
        await _fill(bs, topic_name, 1, 30)
        c = AsyncConsumer(bootstrap_servers=bs, group_id=f"g-{topic_name}",
                          auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                          heartbeat_interval_ms=100, auto_commit_interval_ms=60_000,
                          fetch_max_wait_ms=100)
        at_revoke: list[OffsetAndMetadata | None] = []

        class Listener:
            async def on_partitions_revoked(self, parts: Any) -> None:
                at_revoke.append((await c.committed([tp], timeout=5))[tp])

            def on_partitions_assigned(self, parts: Any) -> None:
                pass

        listener = Listener()
        async with c:
            c.subscribe([topic_name], listener=listener)
            got: list[int] = []
            deadline = time.monotonic() + 20
            while len(got) < 20:  # two polls of 10: the first batch is then processed
                assert time.monotonic() < deadline, got
                for recs in (await c.getmany(timeout=0.2, max_records=10)).values():
                    got.extend(r.offset for r in recs)
            assert got == list(range(20))
            started = time.monotonic()
            # A rebalance, in the background:
            c.subscribe([topic_name, f"{topic_name}-other"], listener=listener)
            while not at_revoke:
                assert time.monotonic() < deadline, "no revocation"
                if polls:
                    # Until the revocation starts, polls may still hand records out.
                    for recs in (await c.getmany(timeout=0.05, max_records=1)).values():
                        got.extend(r.offset for r in recs)
                else:
                    await asyncio.sleep(0.05)  # the application is busy elsewhere
            waited = time.monotonic() - started
        committed = at_revoke[0]
        assert committed is not None
        if polls:
            assert committed.offset == len(got)  # everything handed out before the revocation
            assert waited < SESSION_MS / 2000
        else:
            assert committed.offset == 10  # the batch in hand is read again, not lost
            assert waited >= SESSION_MS / 2000 * 0.9

    asyncio.run(main())
