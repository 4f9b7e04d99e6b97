"""The consumer's options are parsed once into frozen, typed settings (ConsumerSettings with
the group's GroupSettings) that the fetcher and the group coordinator read."""

from __future__ import annotations

import dataclasses

import pytest

from kontrakt import AsyncConsumer
from kontrakt._config import ClientConfig
from kontrakt.clients.consumer._config import CONSUMER_OPTIONS, consumer_settings
from kontrakt.clients.group import RebalanceProtocol
from kontrakt.errors import ConfigError


def test_units_aliases_and_derived_values() -> None:
    s = consumer_settings(ClientConfig(CONSUMER_OPTIONS, {
        "fetch.max.wait.ms": "250", "max.partition.fetch.bytes": 1000,
        "max.decompressed.batch.multiple": 3, "queued.max.messages.kbytes": 2,
        "auto.offset.reset": "smallest", "isolation.level": "read_committed",
        "retry.backoff.ms": 50, "request.timeout.ms": 1500}))
    assert s.fetch_max_wait_ms == 250
    assert s.max_batch_bytes == 3000
    assert s.queued_max_bytes == 2048
    assert s.auto_offset_reset == "earliest"
    assert s.read_committed is True
    assert s.retry_backoff == 0.05 and s.request_timeout == 1.5
    assert s.group is None  # no group.id
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.fetch_min_bytes = 2  # type: ignore[misc]


def test_group_settings() -> None:
    s = consumer_settings(ClientConfig(CONSUMER_OPTIONS, {
        "group.id": "g", "max.poll.interval.ms": 7000, "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "cooperative-sticky", "client.rack": "r1"}))
    g = s.group
    assert g is not None
    assert (g.group_id, g.protocol, g.instance_id) == ("g", "classic", None)
    # rebalance.timeout.ms defaults to max.poll.interval.ms
    assert g.rebalance_timeout_ms == 7000 and g.max_poll_interval == 7.0
    assert g.heartbeat_interval == 0.5 and g.rack == "r1"
    assert [a.name for a in g.assignors] == ["cooperative-sticky"]
    assert g.rebalance_protocol is RebalanceProtocol.COOPERATIVE
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.group_id = "h"  # type: ignore[misc]


def test_strategy_checked_only_with_a_group() -> None:
    # As before the settings: the assignors are the group's, so no group.id, no check.
    assert consumer_settings(ClientConfig(CONSUMER_OPTIONS, {
        "partition.assignment.strategy": "nope"})).group is None
    with pytest.raises(ConfigError, match="nope"):
        AsyncConsumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g",
                       "partition.assignment.strategy": "nope"})
