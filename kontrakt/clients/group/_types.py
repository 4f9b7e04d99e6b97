"""What the group code needs of the consumer it serves, as :class:`typing.Protocol`s.

The coordinator moves the consumer's assignment and reads its positions, but the consumer's
classes (``SubscriptionState``, ``PartitionState``, ``FetchBuffer``) live in
:mod:`kontrakt.clients.consumer`, which imports this package; these protocols name the
members used here, so that the group package depends on no consumer module and mypy checks
that the consumer's types fit (structurally, where the consumer hands them over).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from kontrakt._types import OffsetAndMetadata, TopicPartition

__all__ = ["GroupBuffer", "GroupSubscription", "ListenerRunner", "MemberPartition"]


class MemberPartition(Protocol):
    """One assigned partition's state, as the group code reads and flags it."""

    #: Nothing more of the partition is handed to the application.
    paused: bool
    #: Bumped to make fetches in flight for the partition stale.
    gen: int
    #: The application poll that last handed out records of the partition.
    poll_seq: int


class GroupSubscription(Protocol):
    """The consumer's subscription and assignment (``SubscriptionState``).

    Changes to the assignment are made under :attr:`GroupBuffer.lock`.
    """

    @property
    def topics(self) -> frozenset[str]: ...

    @property
    def pattern(self) -> re.Pattern[str] | None: ...

    @property
    def subscribed(self) -> bool: ...

    @property
    def manual(self) -> bool: ...

    @property
    def assignment(self) -> Mapping[TopicPartition, MemberPartition]: ...

    @property
    def retiring(self) -> Mapping[TopicPartition, MemberPartition]: ...

    def state_of(self, tp: TopicPartition) -> MemberPartition | None: ...

    def release(self, states: Mapping[TopicPartition, Any]) -> None: ...

    def match_pattern(self, all_topics: Iterable[str], *, exclude_internal: bool = True,
                      internal: Iterable[str] = ()) -> frozenset[str]: ...

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None: ...

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None: ...

    def consumed_offsets(self, poll_seq: int | None = None, *, stored_only: bool = False
                         ) -> dict[TopicPartition, OffsetAndMetadata]: ...


class GroupBuffer(Protocol):
    """The consumer's fetch buffer (``FetchBuffer``): its lock guards positions and the
    assignment; ``poll_seq`` counts the application's polls."""

    @property
    def lock(self) -> AbstractContextManager[Any]: ...

    @property
    def poll_seq(self) -> int: ...


#: Runs a rebalance listener's callback with the partitions (the sync consumer runs it on
#: the application's thread).
ListenerRunner = Callable[[Callable[..., Any], "set[TopicPartition]"], Awaitable[None]]
