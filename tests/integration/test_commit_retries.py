"""Commits refused for a leader epoch or a stale member epoch are retried (librdkafka mock).

- The mock rejects an OffsetCommit whose committed leader epoch is not the partition's
  current one (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH; a Kafka broker stores it without
  checking). After a leader move the consumer's position still carries the epoch of the
  records it read, so the commit is refused until it is sent with the leader's epoch, which
  the consumer learns from refreshed metadata.
- KIP-848 (group.protocol=consumer): STALE_MEMBER_EPOCH is injected into OffsetCommit (the
  mock only bumps a member's epoch in the heartbeat answer that tells the member, so it
  never refuses a commit for it by itself). The consumer must send a heartbeat at once and
  commit again, while it still owns the partitions; for partitions it does not own the
  error reaches the application as CommitFailedError.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.errors import CommitFailedError
from kontrakt.testing import MockCluster
from tests.integration.test_groups import _fill

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT = 8, 68
STALE_MEMBER_EPOCH = 113
RECORDS = 10


async def _consume_all(c: AsyncConsumer, count: int) -> None:
    got: list[int] = []
    deadline = time.monotonic() + 20
    while len(got) < count:
        assert time.monotonic() < deadline, f"stalled after {got}"
        for recs in (await c.getmany(timeout=0.1)).values():
            got.extend(r.offset for r in recs)
    assert got == list(range(count))


def test_commit_after_leader_move_uses_the_current_leader_epoch(mock_cluster: MockCluster,
                                                                 topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1)
    mock_cluster.group_initial_rebalance_delay_ms(0)
    bs = mock_cluster.bootstrap_servers
    tp = TopicPartition(topic_name, 0)

    async def main() -> None:
        await _fill(bs, topic_name, 1, RECORDS)
        async with AsyncConsumer(bootstrap_servers=bs, group_id=f"g-{topic_name}",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=1500, heartbeat_interval_ms=100,
                                 fetch_max_wait_ms=50, retry_backoff_ms=20,
                                 retry_backoff_max_ms=200) as c:
            c.subscribe([topic_name])
            await _consume_all(c, RECORDS)
            before = c._client.cluster.topics[topic_name].partitions[0]
            await c.commit(timeout=3)  # the records' epoch is the leader's: accepted
            # The leader moves: the mock bumps the partition's leader epoch.
            others = [b for b in range(1, mock_cluster.num_brokers + 1) if b != before.leader]
            mock_cluster.set_partition_leader(topic_name, 0, others[0])
            mock_cluster.start_request_tracking()
            started = time.monotonic()
            await c.commit(timeout=5)  # the position still carries the old epoch
            took = time.monotonic() - started
            commits = [r for r in mock_cluster.get_requests() if r.api_key == OFFSET_COMMIT]
            assert len(commits) >= 2, "the first commit was not refused"
            after = c._client.cluster.topics[topic_name].partitions[0]
            assert after.leader_epoch > before.leader_epoch
            committed = (await c.committed([tp]))[tp]
            assert committed is not None and committed.offset == RECORDS
            assert committed.leader_epoch == after.leader_epoch
            assert took < 2.0, f"commit took {took:.2f} s"
            # Later commits of the same position go with the learnt epoch at once.
            mock_cluster.clear_requests()
            await c.commit(timeout=3)
            commits = [r for r in mock_cluster.get_requests() if r.api_key == OFFSET_COMMIT]
            assert len(commits) == 1

    asyncio.run(main())


def test_stale_member_epoch_commit_is_retried_after_a_heartbeat(mock_cluster: MockCluster,
                                                                 topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1)
    # Heartbeats far apart: a quick retry proves the heartbeat was sent for the commit.
    mock_cluster.group_consumer_heartbeat_interval_ms(5000)
    bs = mock_cluster.bootstrap_servers
    tp = TopicPartition(topic_name, 0)

    async def main() -> None:
        await _fill(bs, topic_name, 1, RECORDS)
        async with AsyncConsumer(bootstrap_servers=bs, group_id=f"g-{topic_name}",
                                 group_protocol="consumer", auto_offset_reset="earliest",
                                 enable_auto_commit=False, retry_backoff_ms=20,
                                 retry_backoff_max_ms=200) as c:
            c.subscribe([topic_name])
            await _consume_all(c, RECORDS)
            group = c._coordinator
            assert group.member_epoch > 0
            mock_cluster.start_request_tracking()
            mock_cluster.push_request_errors(OFFSET_COMMIT, [STALE_MEMBER_EPOCH])
            started = time.monotonic()
            await c.commit(timeout=4)
            took = time.monotonic() - started
            apis = [r.api_key for r in mock_cluster.get_requests()
                    if r.api_key in (OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT)]
            # Refused, a heartbeat at once, committed.
            assert apis[:3] == [OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT, OFFSET_COMMIT], apis
            assert took < 2.0, f"commit took {took:.2f} s"
            committed = (await c.committed([tp]))[tp]
            assert committed is not None and committed.offset == RECORDS

            # A partition the member does not own: not retried, the application is told.
            mock_cluster.push_request_errors(OFFSET_COMMIT, [STALE_MEMBER_EPOCH])
            with pytest.raises(CommitFailedError):
                await c.commit({TopicPartition(f"{topic_name}-other", 0):
                                OffsetAndMetadata(1)}, timeout=4)

    asyncio.run(main())
