"""Consumer groups: consumer protocol blobs, partition assignors and the group coordinator.

The sans-I/O half (this package's :mod:`._protocol` and :mod:`._assignors`) encodes and decodes
the subscription / assignment bytes carried by JoinGroup and SyncGroup and computes assignments
on the group leader. The coordinator state machine drives the JoinGroup / SyncGroup / Heartbeat
exchange with the broker.

Layout of the client side, imports pointing one way (down this list):
:mod:`._coordinator` (``make_coordinator``: picks the protocol), :mod:`._classic` (JoinGroup,
SyncGroup, Heartbeat) and :mod:`._consumer_protocol` (KIP-848 ConsumerGroupHeartbeat), both
over :mod:`._membership` (what they share), over :mod:`._offsets` (OffsetFetch, OffsetCommit),
reading :mod:`._settings` (``GroupSettings``) and typed against :mod:`._types` (the
protocols the consumer's subscription and buffer satisfy).
"""

from __future__ import annotations

from kontrakt.clients.group._assignors import (
    ASSIGNORS,
    Assignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_for,
    cooperative_adjust,
    member_sort_key,
    owned_partitions,
    select_rebalance_protocol,
)
from kontrakt.clients.group._protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    MemberSubscription,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

__all__ = [
    "ASSIGNORS",
    "CONSUMER_PROTOCOL_TYPE",
    "Assignment",
    "Assignor",
    "CooperativeStickyAssignor",
    "MemberSubscription",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "assignor_for",
    "cooperative_adjust",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "member_sort_key",
    "owned_partitions",
    "select_rebalance_protocol",
]

# --- coordinator exports (added by the group coordinator's author) -------------------------
# Add the coordinator's imports below this line and extend __all__ with
# `__all__ += [...]` so the two halves can be edited independently.
from kontrakt.clients.group._classic import GroupCoordinator
from kontrakt.clients.group._consumer_protocol import ConsumerGroupMembership
from kontrakt.clients.group._settings import parse_strategies

__all__ += ["ConsumerGroupMembership", "GroupCoordinator", "parse_strategies"]
# --- end of coordinator exports ------------------------------------------------------------
