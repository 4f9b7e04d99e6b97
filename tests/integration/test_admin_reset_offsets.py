"""reset_group_offsets against Tansu 0.6.0: ListOffsets earliest/latest, OffsetFetch and
OffsetCommit there are faithful when each record is its own batch (Tansu's LATEST is the
last batch's first offset + 1, see TEST-BROKERS.md), and so is the refusal while a member
is in the group. Timestamp lookups are not (Tansu answers 0 for any time): the
timestamp targets, errors and retries are tested against crafted brokers in
tests/unit/admin/test_admin_reset_offsets.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kontrakt import Consumer, Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import AdminClient, NewTopic, OffsetShift, OffsetSpec
from kontrakt.protocol.errors import UnknownMemberIdError
from kontrakt.testing import TansuBroker

pytestmark = pytest.mark.integration


@pytest.fixture
def admin(tansu_broker: TansuBroker) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=tansu_broker.bootstrap_servers,
                     retry_backoff_ms=20, default_api_timeout_ms=10000) as client:
        yield client


def _fill(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        for partition, n in counts.items():
            for i in range(n):  # one record per batch: Tansu's LATEST is right then
                producer.send_and_wait(topic, b"v%d" % i, partition=partition)


def _committed(admin: AdminClient, group: str) -> dict[TP, int]:
    return {tp: om.offset for tp, om in admin.list_consumer_group_offsets(group).items()
            if om is not None}


def test_targets_are_resolved_clamped_and_committed(admin: AdminClient,
                                                    tansu_broker: TansuBroker,
                                                    topic_name: str) -> None:
    # Broken variants tried: no clamping commits 102 for p1; OffsetShift applied to 0
    # instead of the committed offset gives 0 + 1 = 1 (not 3) in the second reset;
    # dry_run ignored changes the committed offsets.
    admin.create_topics([NewTopic(topic_name, 2)])
    _fill(tansu_broker.bootstrap_servers, topic_name, {0: 5, 1: 3})
    group = topic_name + "-g"
    p0, p1 = TP(topic_name, 0), TP(topic_name, 1)
    admin.alter_consumer_group_offsets(group, {p0: 2, p1: 1})

    assert admin.reset_group_offsets(group, {p0: OffsetShift(-5), p1: 100},
                                     dry_run=True) == {p0: 0, p1: 3}
    assert _committed(admin, group) == {p0: 2, p1: 1}

    assert admin.reset_group_offsets(group, {p0: OffsetShift(-5), p1: 100}) == {p0: 0, p1: 3}
    assert _committed(admin, group) == {p0: 0, p1: 3}

    assert admin.reset_group_offsets(group, {p0: OffsetSpec.latest(),
                                             p1: OffsetSpec.earliest()}) == {p0: 5, p1: 0}
    assert admin.reset_group_offsets(group, {p0: OffsetShift(-2), p1: OffsetShift(1)}) == {
        p0: 3, p1: 1}
    assert _committed(admin, group) == {p0: 3, p1: 1}


def test_a_group_with_a_member_is_refused_with_a_clear_error(admin: AdminClient,
                                                             tansu_broker: TansuBroker,
                                                             topic_name: str) -> None:
    # Broken variant tried: raising the commit's error as is loses "active members".
    admin.create_topics([NewTopic(topic_name, 1)])
    _fill(tansu_broker.bootstrap_servers, topic_name, {0: 2})
    group = topic_name + "-g"
    tp = TP(topic_name, 0)
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group,
                  session_timeout_ms=1000, heartbeat_interval_ms=200,
                  auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 15
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment() == {tp}
        with pytest.raises(UnknownMemberIdError, match="active members"):
            admin.reset_group_offsets(group, {tp: OffsetSpec.latest()}, timeout=5)
