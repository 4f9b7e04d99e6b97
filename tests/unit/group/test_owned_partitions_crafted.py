"""KIP-848: a heartbeat reports as owned only partitions the group assigned.

After ``unsubscribe(); assign([p])`` the consumer's assignment is the application's, not the
group's; until the leave completes the member still holds (and is handing back) what the
group gave it. A heartbeat the membership task sends in between (its timed auto commit was
in flight when the application called them) must report the group's partitions, never the
manual ones: the coordinator would take them as this member's, and the group's own
partitions as let go before their hand-back commit. The crafted coordinator (from
test_unsubscribe_races_crafted) makes the call land exactly while that commit is in flight:
its OffsetCommit handler makes the application's two calls. No test broker lets a test act
inside a commit.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kontrakt.clients.consumer import AsyncConsumer
from tests._crafted_broker import FakeBroker
from tests.unit.consumer.test_unsubscribe_races_crafted import (
    P2,
    PARTS,
    TOPIC,
    VERSIONS,
    Coordinator,
    _config,
    _started,
)


class Watching(Coordinator):
    """Records each heartbeat's (epoch, owned partitions or None); ``during_commit`` runs
    inside the next OffsetCommit."""

    def __init__(self, target: set[int]) -> None:
        super().__init__(target)
        self.heartbeats: list[tuple[int, frozenset[int] | None]] = []
        self.during_commit: Any = None

    def consumer_heartbeat(self, version: int, req: Any) -> Any:
        owned = None if req.topic_partitions is None else frozenset(
            p for tp in req.topic_partitions for p in tp.partitions)
        self.heartbeats.append((req.member_epoch, owned))
        return super().consumer_heartbeat(version, req)

    def commit(self, version: int, req: Any) -> Any:
        act, self.during_commit = self.during_commit, None
        if act is not None:
            act()
        return super().commit(version, req)


def test_a_heartbeat_between_unsubscribe_and_the_leave_reports_only_group_partitions(
        ) -> None:
    coordinator = Watching({0, 1})
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with FakeBroker({TOPIC: PARTS}, coordinator.handlers(),
                              versions=VERSIONS) as broker:
            _started(coordinator, broker)
            async with AsyncConsumer(_config(broker, "consumer",
                                             auto_commit_interval_ms=100)) as c:
                c.subscribe([TOPIC])
                deadline = time.monotonic() + 10
                while len(c.assignment()) < 2 or not coordinator.committed:
                    assert time.monotonic() < deadline, coordinator.heartbeats
                    await c.getmany(0.05)

                def by_hand() -> None:
                    seen["from"] = len(coordinator.heartbeats)
                    c.unsubscribe()
                    c.assign([P2])
                coordinator.during_commit = by_hand
                while not coordinator.left:
                    assert time.monotonic() < deadline, coordinator.heartbeats
                    await c.getmany(0.05)
                seen["assignment"] = c.assignment()

    asyncio.run(main())
    assert seen["assignment"] == {P2}
    after = coordinator.heartbeats[seen["from"]:]
    assert after[-1][0] == -1, after  # the leave
    between = after[:-1]
    # The window is exercised: the member heartbeat before leaving ...
    assert between, coordinator.heartbeats
    # ... and never reported the manual P2 (nor gave up the group's partitions early).
    assert all(owned in (None, frozenset({0, 1})) for _epoch, owned in between), after
