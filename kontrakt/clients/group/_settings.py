"""A consumer group's options, parsed once into :class:`GroupSettings`.

The options themselves are declared with the consumer's
(:data:`kontrakt.clients.consumer._config.CONSUMER_OPTIONS`); the group code reads only
these settings, in the units it uses (seconds, assignor objects).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kontrakt.clients.group._assignors import Assignor, RebalanceProtocol, assignor_for
from kontrakt.errors import ConfigError

__all__ = ["GroupSettings", "group_settings", "parse_strategies"]


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """A consumer's group options after validation, in the units the code uses."""

    group_id: str
    instance_id: str | None
    #: ``classic`` (JoinGroup/SyncGroup) or ``consumer`` (KIP-848).
    protocol: str
    #: The coordinator's assignor for ``group.protocol=consumer`` (None: its default).
    remote_assignor: str | None
    session_timeout_ms: int
    heartbeat_interval: float
    max_poll_interval: float
    rebalance_timeout_ms: int
    auto_commit: bool
    auto_commit_interval: float
    auto_offset_store: bool
    exclude_internal_topics: bool
    rack: str | None
    request_timeout: float
    retry_backoff: float
    retry_backoff_max: float
    #: The classic protocol's assignors, in preference order (the group's leader's pick).
    assignors: tuple[Assignor, ...]
    #: Eager unless every assignor can rebalance cooperatively.
    rebalance_protocol: RebalanceProtocol


def group_settings(config: Mapping[str, Any]) -> GroupSettings:
    """The group settings of a consumer's validated options (``group.id`` set).

    Raises:
        ConfigError: a bad ``partition.assignment.strategy``.
    """
    assignors = tuple(parse_strategies(config["partition.assignment.strategy"]))
    return GroupSettings(
        group_id=config["group.id"],
        instance_id=config["group.instance.id"],
        protocol=config["group.protocol"],
        remote_assignor=config.get("group.remote.assignor"),
        session_timeout_ms=int(config["session.timeout.ms"]),
        heartbeat_interval=config["heartbeat.interval.ms"] / 1000,
        max_poll_interval=config["max.poll.interval.ms"] / 1000,
        rebalance_timeout_ms=int(config["rebalance.timeout.ms"]
                                 or config["max.poll.interval.ms"]),
        auto_commit=bool(config["enable.auto.commit"]),
        auto_commit_interval=config["auto.commit.interval.ms"] / 1000,
        auto_offset_store=bool(config["enable.auto.offset.store"]),
        exclude_internal_topics=bool(config["exclude.internal.topics"]),
        rack=config.get("client.rack"),
        request_timeout=config["request.timeout.ms"] / 1000,
        retry_backoff=config["retry.backoff.ms"] / 1000,
        retry_backoff_max=config["retry.backoff.max.ms"] / 1000,
        assignors=assignors,
        rebalance_protocol=_rebalance_protocol(assignors),
    )


def parse_strategies(value: Any) -> list[Assignor]:
    """``partition.assignment.strategy`` as assignors: a name, a comma-separated string,
    or a list of names, classes and :class:`Assignor` objects.

    Raises:
        ConfigError: unknown names, duplicates, or an empty list.
    """
    items: list[Any]
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, Iterable):
        items = list(value)
    else:
        items = [value]
    assignors = [assignor_for(x) for x in items]
    if not assignors:
        raise ConfigError("partition.assignment.strategy is empty")
    names = [a.name for a in assignors]
    if len(set(names)) != len(names):
        raise ConfigError(f"partition.assignment.strategy names an assignor twice: {names}")
    return assignors


def _rebalance_protocol(assignors: Iterable[Assignor]) -> RebalanceProtocol:
    # Cooperative only when every configured assignor can run it (as the Java client does).
    if all(RebalanceProtocol.COOPERATIVE in a.supported_protocols for a in assignors):
        return RebalanceProtocol.COOPERATIVE
    return RebalanceProtocol.EAGER
