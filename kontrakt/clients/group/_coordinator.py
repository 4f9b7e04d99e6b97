"""The group coordinator a consumer gets: classic or KIP-848, by ``group.protocol``.

The protocols live in :mod:`._classic` and :mod:`._consumer_protocol`, over what they share
(:mod:`._membership`, :mod:`._offsets`); only this module knows both.
"""

from __future__ import annotations

from collections.abc import Callable

from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.group._classic import GroupCoordinator
from kontrakt.clients.group._consumer_protocol import ConsumerGroupMembership
from kontrakt.clients.group._membership import GroupMembership
from kontrakt.clients.group._settings import GroupSettings
from kontrakt.clients.group._types import GroupBuffer, GroupSubscription, ListenerRunner

__all__ = ["GroupCoordinator", "GroupMembership", "make_coordinator"]


def make_coordinator(client: AsyncKafkaClient, subscription: GroupSubscription,
                     settings: GroupSettings, *, buffer: GroupBuffer,
                     wake: Callable[[], None], listener_runner: ListenerRunner
                     ) -> GroupMembership:
    """The coordinator for ``group.protocol``: classic, or consumer (KIP-848).

    Args:
        client: the consumer's network core.
        subscription: the consumer's subscription state.
        settings: the consumer's group settings.
        buffer: the consumer's fetch buffer (its lock guards positions).
        wake: called to make the fetcher re-plan after the assignment changes.
        listener_runner: runs listener callbacks.
    """
    cls = (ConsumerGroupMembership if settings.protocol == "consumer" else GroupCoordinator)
    return cls(client, subscription, settings, buffer=buffer, wake=wake,
               listener_runner=listener_runner)
