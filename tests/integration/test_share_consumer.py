"""Share groups (KIP-932) on the librdkafka mock cluster: ShareConsumer / AsyncShareConsumer.

Which broker: librdkafka 2.16's mock cluster serves ShareGroupHeartbeat, ShareFetch and
ShareAcknowledge v1 (not ShareGroupDescribe), with a server-side assignment that splits
partitions between members, record locks, delivery counts and share sessions; Tansu has no
share groups. Its share groups start at the end of a partition unless told otherwise, so
every test sets ``auto.offset.reset`` earliest for them, and lowers the heartbeat interval
(5 s by default) to 200 ms to keep the tests short. confluent-kafka's ShareConsumer (the
same librdkafka) is the oracle for what members of one share group see.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from kontrakt import Producer
from kontrakt.clients._wait import cancel_and_wait
from kontrakt.clients.share import AcknowledgeType, AsyncShareConsumer, ShareConsumer
from kontrakt.errors import KafkaConnectionError, UnsupportedVersionError
from kontrakt.protocol.errors import ShareSessionNotFoundError
from kontrakt.testing import MockCluster, TansuBroker

pytestmark = pytest.mark.integration

TOPIC = "jobs"


def _cluster(factory: Callable[..., MockCluster], partitions: int, records: int, *,
             lock_ms: int | None = None, session_ms: int | None = None) -> MockCluster:
    cluster = factory(3)
    cluster.create_topic(TOPIC, partitions, 1)
    cluster.sharegroup_auto_offset_reset(True)
    cluster.sharegroup_heartbeat_interval_ms(200)
    if lock_ms is not None:
        cluster.sharegroup_record_lock_duration_ms(lock_ms)
    if session_ms is not None:
        cluster.sharegroup_session_timeout_ms(session_ms)
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        for i in range(records):
            producer.send(TOPIC, value=str(i).encode(), partition=i % partitions)
        producer.flush()
    return cluster


def _values(records: list[bytes | None]) -> list[int]:
    return [int(v or b"-1") for v in records]


def test_every_record_is_delivered_once_and_implicit_acks_keep_it_away(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # Broken variants tried: poll() not accepting the previous poll's records (they come
    # back once their 500 ms lock runs out); records outside the acquired ranges handed out
    # (max.poll.records 7 < the 40-record batches: duplicates).
    cluster = _cluster(mock_cluster_factory, 3, 120, lock_ms=500)
    with ShareConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g",
                       max_poll_records=7) as consumer:
        consumer.subscribe([TOPIC])
        seen: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while len(seen) < 120 and time.monotonic() < deadline:
            batch = consumer.poll(0.5)
            assert len(batch) <= 7
            seen.extend(r.value for r in batch)
        assert sorted(_values(seen)) == list(range(120))
        # Past the lock duration: nothing accepted comes back.
        until = time.monotonic() + 1.5
        while time.monotonic() < until:
            seen.extend(r.value for r in consumer.poll(0.3))
        assert sorted(_values(seen)) == list(range(120))


def test_released_record_comes_back_with_delivery_count_two_and_rejected_does_not(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # Broken variants tried: REJECT sent as RELEASE (offset 5 comes back); acknowledgements
    # never sent (nothing comes back: the lock is long).
    cluster = _cluster(mock_cluster_factory, 1, 10)

    async def main() -> None:
        async with AsyncShareConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                      group_id="g",
                                      share_acknowledgement_mode="explicit") as consumer:
            consumer.subscribe(TOPIC)
            first: list[int] = []
            while len(first) < 10:
                for r in await consumer.poll(5):
                    assert consumer.delivery_count(r) == 1
                    first.append(r.offset)
                    kind = {3: AcknowledgeType.RELEASE, 5: AcknowledgeType.REJECT}.get(
                        r.offset, AcknowledgeType.ACCEPT)
                    consumer.acknowledge(r, kind)
            assert sorted(first) == list(range(10))
            results = await consumer.commit_sync(5)
            assert results and all(e is None for e in results.values())
            again = []
            until = time.monotonic() + 1.5
            while time.monotonic() < until:
                for r in await consumer.poll(0.3):
                    again.append((r.offset, consumer.delivery_count(r)))
                    consumer.acknowledge(r)
            assert again == [(3, 2)]
    asyncio.run(main())


def test_records_a_member_closed_without_acknowledging_go_to_another_member(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # The mock frees a member's records when it leaves (epoch -1); close() also releases
    # them explicitly and closes its share sessions, which the mock does not need.
    # Broken variant tried: close() without the leave heartbeat (the records stay locked for
    # the 30 s session: the other member gets nothing within 5 s).
    cluster = _cluster(mock_cluster_factory, 1, 5, lock_ms=30_000, session_ms=30_000)
    cfg = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g",
           "share.acknowledgement.mode": "explicit"}
    first = ShareConsumer(cfg)
    first.subscribe([TOPIC])
    held = first.poll(5)
    assert [r.offset for r in held] == [0, 1, 2, 3, 4]
    first.close()
    with ShareConsumer(cfg) as second:
        second.subscribe([TOPIC])
        got: list[tuple[int, int | None]] = []
        deadline = time.monotonic() + 5
        while len(got) < 5 and time.monotonic() < deadline:
            for r in second.poll(0.5):
                got.append((r.offset, second.delivery_count(r)))
                second.acknowledge(r)
        assert got == [(o, 2) for o in range(5)]


def test_records_of_a_crashed_member_go_to_another_member(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # The first member's connections drop without a word (no acknowledgement, no leave);
    # the mock drops it after its 1 s session timeout and frees its records.
    # Broken variant tried: delivery counts not taken from the acquired ranges (always 1).
    cluster = _cluster(mock_cluster_factory, 1, 5, session_ms=1000)

    async def main() -> list[tuple[int, int | None]]:
        crashed = AsyncShareConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                     group_id="g", share_acknowledgement_mode="explicit")
        crashed.subscribe([TOPIC])
        assert len(await crashed.poll(5)) == 5
        task = crashed._membership._task
        assert task is not None
        await cancel_and_wait([task])
        await crashed._client.close(0)
        crashed._closed = True
        got: list[tuple[int, int | None]] = []
        async with AsyncShareConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                      group_id="g",
                                      share_acknowledgement_mode="explicit") as survivor:
            survivor.subscribe([TOPIC])
            deadline = time.monotonic() + 8
            while len(got) < 5 and time.monotonic() < deadline:
                for r in await survivor.poll(0.5):
                    got.append((r.offset, survivor.delivery_count(r)))
                    survivor.acknowledge(r)
        return got
    assert asyncio.run(main()) == [(o, 2) for o in range(5)]


def test_two_members_split_the_records_with_none_lost_or_repeated(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # Broken variant tried: records outside the acquired ranges handed out (each member
    # sees the rest of every batch again).
    cluster = _cluster(mock_cluster_factory, 4, 200)

    async def main() -> tuple[list[int], list[int]]:
        cfg = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g",
               "max.poll.records": 9}
        async with AsyncShareConsumer(cfg) as a, AsyncShareConsumer(cfg) as b:
            a.subscribe([TOPIC])
            b.subscribe([TOPIC])
            got_a: list[int] = []
            got_b: list[int] = []
            deadline = time.monotonic() + 20
            while len(got_a) + len(got_b) < 200 and time.monotonic() < deadline:
                ra, rb = await asyncio.gather(a.poll(0.2), b.poll(0.2))
                got_a.extend(_values([r.value for r in ra]))
                got_b.extend(_values([r.value for r in rb]))
            for c in (a, b):
                await c.commit_sync(5)
            return got_a, got_b
    got_a, got_b = asyncio.run(main())
    counts = Counter(got_a + got_b)
    assert sorted(counts) == list(range(200))
    assert set(counts.values()) == {1}
    assert got_a and got_b


def test_confluent_share_consumer_and_ours_share_one_group(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # The oracle: confluent-kafka's ShareConsumer in the same share group. Every record goes
    # to exactly one of the two, once.
    # Broken variant tried: records outside the acquired ranges handed out (some records
    # are seen twice). (A share session epoch stuck at 1 is not caught: the mock does not
    # check it.)
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cluster = _cluster(mock_cluster_factory, 4, 200)
    theirs = confluent_kafka.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers,
                                            "group.id": "g", "log_level": 3})
    try:
        theirs.subscribe([TOPIC])
        with ShareConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g",
                           max_poll_records=10) as ours:
            ours.subscribe([TOPIC])
            got_theirs: list[int] = []
            got_ours: list[int] = []
            deadline = time.monotonic() + 20
            while len(got_theirs) + len(got_ours) < 200 and time.monotonic() < deadline:
                for m in theirs.poll(0.1):
                    assert m.error() is None
                    got_theirs.append(int(m.value()))
                got_ours.extend(_values([r.value for r in ours.poll(0.1)]))
            ours.commit_sync(5)
            theirs.commit_sync(5)
    finally:
        theirs.close()
    counts = Counter(got_theirs + got_ours)
    assert sorted(counts) == list(range(200))
    assert set(counts.values()) == {1}
    assert got_theirs and got_ours


def test_unsubscribe_hands_the_held_records_back(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # Broken variant tried: unsubscribe() only forgetting the topics (no leave: the records
    # stay locked for the 30 s session).
    cluster = _cluster(mock_cluster_factory, 1, 5, lock_ms=30_000, session_ms=30_000)
    cfg = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g",
           "share.acknowledgement.mode": "explicit"}
    with ShareConsumer(cfg) as first, ShareConsumer(cfg) as second:
        first.subscribe([TOPIC])
        assert len(first.poll(5)) == 5
        first.unsubscribe()
        second.subscribe([TOPIC])
        got: list[tuple[int, int | None]] = []
        deadline = time.monotonic() + 5
        while len(got) < 5 and time.monotonic() < deadline:
            for r in second.poll(0.5):
                got.append((r.offset, second.delivery_count(r)))
                second.acknowledge(r)
        assert got == [(o, 2) for o in range(5)]
        assert first.subscription() == []


def test_the_share_groups_page_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    # The docs' first example runs as written (on its own mock cluster) and commits
    # cleanly (the deserializing one is a sketch over the application's own handlers).
    page = Path(__file__).resolve().parents[2] / "docs" / "share-groups.md"
    block = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)[0]
    exec(compile(block, str(page), "exec"), {"__name__": "share_groups_example"})
    printed = capsys.readouterr().out
    assert printed.startswith("{TopicPartition(topic='jobs', partition=")
    assert "Error" not in printed and printed.count(": None") >= 1


def test_a_broker_without_share_groups_fails_the_next_call(tansu_broker: TansuBroker,
                                                           topic_name: str) -> None:
    # Tansu 0.6.0 offers no ShareGroupHeartbeat: the background heartbeat's error is raised
    # by poll(), at once, not after the poll's timeout.
    # Broken variant tried: UnsupportedVersionError treated as retriable (poll() returns
    # empty lists until its timeout).
    tansu_broker.create_topic(topic_name, 1)
    with ShareConsumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                       group_id=f"g-{topic_name}") as consumer:
        consumer.subscribe([topic_name])
        started = time.monotonic()
        with pytest.raises(UnsupportedVersionError, match="ShareGroupHeartbeat"):
            consumer.poll(10)
        assert time.monotonic() - started < 5
        assert consumer.assignment() == set()


def test_dropped_connections_lose_nothing_and_repeat_only_redeliveries(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # The mock drops the connection instead of answering the next ShareFetch and
    # ShareAcknowledge requests. It ends the member's share session with the connection,
    # releasing what the session acquired, so records may come again, but only as
    # redeliveries (delivery count 2 or more); none is lost. The acknowledgements that could
    # not be sent are reported by commit_sync().
    # Broken variant tried: the session kept after SHARE_SESSION_NOT_FOUND (every fetch of
    # that leader fails from then on: records are lost).
    cluster = _cluster(mock_cluster_factory, 2, 60, lock_ms=500)
    seen: list[tuple[int, int | None]] = []
    errors: list[object] = []
    with ShareConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g",
                       max_poll_records=5) as consumer:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 20
        dropped = False
        while len({v for v, _ in seen}) < 60 and time.monotonic() < deadline:
            for r in consumer.poll(0.3):
                seen.append((_values([r.value])[0], consumer.delivery_count(r)))
            if seen and not dropped:
                cluster.push_request_errors(78, [MockCluster.DISCONNECT] * 2)
                cluster.push_request_errors(79, [MockCluster.DISCONNECT])
                consumer.commit_async()
                dropped = True
        until = time.monotonic() + 1.5
        while time.monotonic() < until:
            for r in consumer.poll(0.3):
                seen.append((_values([r.value])[0], consumer.delivery_count(r)))
        errors = [e for e in consumer.commit_sync(5).values() if e is not None]
    assert sorted({v for v, _ in seen}) == list(range(60))
    firsts: dict[int, int | None] = {}
    for value, count in seen:
        if value in firsts:
            assert count is not None and count >= 2, (value, count)
        else:
            firsts[value] = count
    assert set(firsts.values()) == {1}
    assert all(isinstance(e, (ShareSessionNotFoundError, KafkaConnectionError))
               for e in errors), errors


def test_a_leader_move_is_followed(mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # Half the records are read from broker 1, then the partition's leader moves to broker
    # 2: the old leader answers NOT_LEADER_OR_FOLLOWER, metadata is refreshed and the rest
    # comes from the new leader, each record once.
    # Broken variant tried: partition errors not triggering a metadata refresh (the
    # consumer keeps asking the old leader: the second half never comes).
    cluster = _cluster(mock_cluster_factory, 1, 0)
    cluster.set_partition_leader(TOPIC, 0, 1)
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        for i in range(20):
            producer.send(TOPIC, value=str(i).encode(), partition=0)
    seen: list[int] = []
    with ShareConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g",
                       max_poll_records=10) as consumer:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 5
        while len(seen) < 10 and time.monotonic() < deadline:
            seen.extend(_values([r.value for r in consumer.poll(0.3)]))
        assert consumer.commit_sync(5)
        cluster.set_partition_leader(TOPIC, 0, 2)
        deadline = time.monotonic() + 10
        while len(seen) < 20 and time.monotonic() < deadline:
            seen.extend(_values([r.value for r in consumer.poll(0.3)]))
    assert sorted(seen) == list(range(20))


def test_close_accepts_what_an_implicit_consumer_was_given(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # Implicit mode: close() accepts the last poll's records (3: max.poll.records); the
    # rest, not handed out (fetched or not), goes to the next member.
    # Broken variant tried: close() releasing the last poll's records in implicit mode
    # (the next member gets all 5).
    cluster = _cluster(mock_cluster_factory, 1, 5, lock_ms=30_000, session_ms=30_000)
    cfg = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g",
           "max.poll.records": 3}
    with ShareConsumer(cfg) as first:
        first.subscribe([TOPIC])
        given = [r.offset for r in first.poll(5)]
    assert given == [0, 1, 2]
    with ShareConsumer(cfg) as second:
        second.subscribe([TOPIC])
        got: list[int] = []
        until = time.monotonic() + 2
        while time.monotonic() < until:
            got.extend(r.offset for r in second.poll(0.3))
    assert got == [3, 4]
