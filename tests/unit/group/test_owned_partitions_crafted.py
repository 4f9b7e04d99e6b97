"""KIP-848: between ``unsubscribe()`` and the leave, no heartbeat, and the member owns only
the group's partitions.

After ``unsubscribe(); assign([p])`` the consumer's assignment is the application's, not the
group's; until the leave completes the member still holds (and is handing back) what the
group gave it. The crafted coordinator (from test_unsubscribe_races_crafted) makes the two
calls land exactly while the membership task's timed auto commit is in flight: its
OffsetCommit handler makes them. No test broker lets a test act inside a commit.

- No heartbeat goes out after them until the leave (epoch -1): one would carry the emptied
  subscription (or another subscribe()'s), and the coordinator would compute the group's
  assignment again for nothing. The Java client keeps its subscription until the leave.
- The member's owned partitions (``_owned()``, what a heartbeat reports and what the answer
  of one in flight is compared with) are the group's, never the manual ones: with no
  heartbeat left in that window to carry them, they are read at that very moment.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
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
    """Records each heartbeat's (epoch, subscribed topics or None, owned partitions or
    None); ``during_commit`` runs inside the next OffsetCommit."""

    def __init__(self, target: set[int]) -> None:
        super().__init__(target)
        self.heartbeats: list[tuple[int, tuple[str, ...] | None, frozenset[int] | None]] = []
        self.during_commit: Any = None

    def consumer_heartbeat(self, version: int, req: Any) -> Any:
        topics = (None if req.subscribed_topic_names is None
                  else tuple(req.subscribed_topic_names))
        owned = None if req.topic_partitions is None else frozenset(
            p for tp in req.topic_partitions for p in tp.partitions)
        self.heartbeats.append((req.member_epoch, topics, owned))
        return super().consumer_heartbeat(version, req)

    def commit(self, version: int, req: Any) -> Any:
        act, self.during_commit = self.during_commit, None
        if act is not None:
            act()
        return super().commit(version, req)


def _unsubscribe_and_assign_inside_the_auto_commit(
        coordinator: Watching, then: Callable[[AsyncConsumer[Any, Any]], None]
        ) -> dict[str, Any]:
    """Subscribe (partitions 0 and 1), then call ``unsubscribe(); assign([P2])`` and
    ``then(consumer)`` inside a timed auto commit; poll until the member left."""
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
                    then(c)
                coordinator.during_commit = by_hand
                while not coordinator.left:
                    assert time.monotonic() < deadline, coordinator.heartbeats
                    await c.getmany(0.05)
                seen["assignment"] = c.assignment()

    asyncio.run(main())
    assert seen["assignment"] == {P2}
    return seen


def test_no_heartbeat_goes_out_between_unsubscribe_and_the_leave() -> None:
    coordinator = Watching({0, 1})
    seen = _unsubscribe_and_assign_inside_the_auto_commit(coordinator, lambda c: None)
    before = coordinator.heartbeats[:seen["from"]]
    after = coordinator.heartbeats[seen["from"]:]
    assert before and before[0][1] == (TOPIC,), before  # (the join named the topic)
    # The next heartbeat is the leave (no subscription, nothing owned: the coordinator
    # ignores both), and the only one: no empty or changed subscription went out first.
    assert after == [(-1, None, None)], after


def test_the_member_owns_only_the_groups_partitions_after_unsubscribe_and_assign() -> None:
    coordinator = Watching({0, 1})
    owned: list[frozenset[Any]] = []
    seen = _unsubscribe_and_assign_inside_the_auto_commit(
        coordinator, lambda c: owned.append(c._coordinator._owned()))
    tid = coordinator.topic_id
    # Read where the auto commit's step resumes: P0 and P1, retired and being handed back;
    # not the manual P2.
    assert owned == [frozenset({(tid, 0), (tid, 1)})], (owned, tid)
    assert coordinator.heartbeats[seen["from"]:][0][0] == -1
