"""alter_replica_log_dirs and describe_replica_log_dirs against crafted brokers.

Neither test broker answers AlterReplicaLogDirs (API 34): Tansu 0.6.0 does not advertise it
and librdkafka's mock cluster has no admin APIs; so neither ever reports a future replica
(one being moved) in DescribeLogDirs either. Two crafted peers (nodes 1 and 2, each
reporting both in Metadata; ``tests/_crafted_broker.py``) check the split per replica
broker, the request each receives, per-replica errors, and the retry after a dropped
connection; the codec is checked byte for byte against kafka-python in
tests/unit/test_messages_admin_ops.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kontrakt.clients.admin import (
    AdminClient,
    AsyncAdminClient,
    ReplicaLogDirInfo,
    TopicPartitionReplica,
)
from kontrakt.errors import InvalidArgumentError, PartialFailureError, ProtocolError
from kontrakt.protocol.errors import (
    BrokerNotAvailableError,
    ClusterAuthorizationFailedError,
    KafkaStorageError,
    LogDirNotFoundError,
)
from kontrakt.protocol.messages import (
    AlterReplicaLogDirsResponse,
    DescribeLogDirsResponse,
    MetadataResponse,
)
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import FAST

ALTER_REPLICA_LOG_DIRS, METADATA = 34, 3
LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, CLUSTER_AUTHORIZATION_FAILED = 57, 56, 31
TPR = TopicPartitionReplica
RES = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult


class Dirs:
    """Answers AlterReplicaLogDirs for every partition asked, with ``errors[(topic,
    partition)]`` or 0; ``drop`` first drops that many connections."""

    def __init__(self, errors: dict[tuple[str, int], int] | None = None, drop: int = 0) -> None:
        self.errors = errors or {}
        self.drop = drop
        self.asked: list[tuple[int, Any]] = []

    def __call__(self, ver: int, req: Any) -> Any:
        self.asked.append((ver, req))
        if self.drop:
            self.drop -= 1
            return None
        parts: dict[str, list[int]] = {}
        for d in req.dirs:
            for t in d.topics:
                parts.setdefault(t.name, []).extend(t.partitions)
        return AlterReplicaLogDirsResponse(results=[RES(topic_name=t, partitions=[
            RES.AlterReplicaLogDirPartitionResult(partition_index=p,
                                                  error_code=self.errors.get((t, p), 0))
            for p in ps]) for t, ps in parts.items()])

    def sent(self) -> list[dict[str, dict[str, list[int]]]]:
        return [{d.path: {t.name: list(t.partitions) for t in d.topics} for d in r.dirs}
                for _v, r in self.asked]


def run_two(one: Any, two: Any, body: Callable[[AsyncAdminClient], Awaitable[Any]],
            key: int = ALTER_REPLICA_LOG_DIRS) -> Any:
    """Run ``body`` against nodes 1 and 2, answering API ``key`` with ``one`` and ``two``."""
    first = CraftedBroker({key: one})
    second = CraftedBroker({key: two})

    def metadata(ver: int, req: Any) -> Any:
        return MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(
            node_id=n, host="127.0.0.1", port=b.port) for n, b in ((1, first), (2, second))],
            cluster_id="crafted", controller_id=1, topics=[])

    first.handlers[METADATA] = second.handlers[METADATA] = metadata

    async def main() -> Any:
        async with first, second, AsyncAdminClient(
                {"bootstrap.servers": first.bootstrap, **FAST}) as admin:
            return await asyncio.wait_for(body(admin), 20)

    return asyncio.run(main())


def test_each_broker_gets_its_replicas_grouped_by_directory_and_topic() -> None:
    one, two = Dirs(), Dirs()
    moves = {TPR("t", 0, 1): "/d1", TPR("t", 1, 2): "/d2", TPR("u", 0, 2): "/d2",
             TPR("t", 2, 2): "/d3"}
    out = run_two(one, two, lambda a: a.alter_replica_log_dirs(moves))
    assert out == dict.fromkeys(moves)
    assert one.sent() == [{"/d1": {"t": [0]}}]
    assert two.sent() == [{"/d2": {"t": [1], "u": [0]}, "/d3": {"t": [2]}}]
    assert [v for v, _r in one.asked + two.asked] == [2, 2]


def test_a_replica_a_broker_refuses_fails_alone_and_is_not_retried() -> None:
    one, two = Dirs(), Dirs({("t", 1): LOG_DIR_NOT_FOUND, ("t", 2): KAFKA_STORAGE_ERROR})
    moves = {TPR("t", 0, 1): "/d1", TPR("t", 1, 2): "/nope", TPR("t", 2, 2): "/d2"}
    out = run_two(one, two, lambda a: a.alter_replica_log_dirs(
        moves, timeout=10, return_exceptions=True))
    assert out[TPR("t", 0, 1)] is None
    assert isinstance(out[TPR("t", 1, 2)], LogDirNotFoundError)
    # KAFKA_STORAGE_ERROR is retriable in Kafka, but Java's alterReplicaLogDirs reports it
    # as the replica's outcome at once
    assert isinstance(out[TPR("t", 2, 2)], KafkaStorageError)
    assert len(two.asked) == 1

    with pytest.raises(PartialFailureError) as info:
        run_two(Dirs(), Dirs({("t", 1): LOG_DIR_NOT_FOUND}),
                lambda a: a.alter_replica_log_dirs(moves, timeout=10))
    assert set(info.value.errors) == {TPR("t", 1, 2)}


def test_a_single_replica_raises_its_own_error() -> None:
    with pytest.raises(LogDirNotFoundError, match="t-1 on broker 2"):
        run_two(Dirs(), Dirs({("t", 1): LOG_DIR_NOT_FOUND}),
                lambda a: a.alter_replica_log_dirs({TPR("t", 1, 2): "/nope"}, timeout=10))


def test_a_dropped_connection_is_retried_at_the_same_broker() -> None:
    one, two = Dirs(), Dirs(drop=1)
    out = run_two(one, two, lambda a: a.alter_replica_log_dirs(
        {TPR("t", 1, 2): "/d2"}, timeout=10))
    assert out == {TPR("t", 1, 2): None}
    assert two.sent() == [{"/d2": {"t": [1]}}] * 2
    assert one.asked == []


def test_a_broker_missing_from_the_metadata_fails_without_a_request() -> None:
    one, two = Dirs(), Dirs()
    out = run_two(one, two, lambda a: a.alter_replica_log_dirs(
        {TPR("t", 0, 9): "/d", TPR("t", 0, 1): "/d"}, timeout=10, return_exceptions=True))
    assert isinstance(out[TPR("t", 0, 9)], BrokerNotAvailableError)
    assert out[TPR("t", 0, 1)] is None
    assert two.asked == [] and len(one.asked) == 1


@pytest.mark.parametrize("moves", [
    {TPR("t", -1, 1): "/d"}, {TPR("", 0, 1): "/d"}, {TPR("t", 0, -1): "/d"},
    {TPR("t", 0, True): "/d"}, {TPR("t", 0, 1): ""}, {TPR("t", 0, 1): None},
    {("t", 0, 1): "/d"},
])
def test_bad_input_is_refused_before_anything_is_sent(moves: Any) -> None:
    one, two = Dirs(), Dirs()
    with pytest.raises(InvalidArgumentError):
        run_two(one, two, lambda a: a.alter_replica_log_dirs(moves))
    assert one.asked == two.asked == []


def test_the_blocking_client_moves_replicas_too() -> None:
    dirs = Dirs()

    async def main() -> Any:
        async with CraftedBroker({ALTER_REPLICA_LOG_DIRS: dirs}) as broker:
            def blocking() -> Any:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    return admin.alter_replica_log_dirs({TPR("t", 0, 1): "/d"}, timeout=10)
            return await asyncio.to_thread(blocking)

    assert asyncio.run(main()) == {TPR("t", 0, 1): None}
    assert dirs.sent() == [{"/d": {"t": [0]}}]


# --- describe_replica_log_dirs ----------------------------------------------------------

DESCRIBE_LOG_DIRS = 35
LR = DescribeLogDirsResponse.DescribeLogDirsResult


class LogDirs:
    """Answers DescribeLogDirs with ``dirs``: path -> [(topic, partition, offset lag,
    is future)], with ``errors`` (path -> code) per directory and ``top`` at the top."""

    def __init__(self, dirs: dict[str, list[tuple[str, int, int, bool]]],
                 errors: dict[str, int] | None = None, top: int = 0) -> None:
        self.dirs = dirs
        self.errors = errors or {}
        self.top = top
        self.asked: list[tuple[int, Any]] = []

    def __call__(self, ver: int, req: Any) -> Any:
        self.asked.append((ver, req))
        results = []
        for path, replicas in self.dirs.items():
            by_topic: dict[str, list[Any]] = {}
            for t, p, lag, future in replicas:
                by_topic.setdefault(t, []).append(LR.DescribeLogDirsTopic.DescribeLogDirsPartition(
                    partition_index=p, partition_size=10, offset_lag=lag, is_future_key=future))
            results.append(LR(error_code=self.errors.get(path, 0), log_dir=path, topics=[
                LR.DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in by_topic.items()]))
        return DescribeLogDirsResponse(error_code=self.top, results=results)

    def topics_asked(self) -> list[list[tuple[str, list[int]]]]:
        return [[(t.topic, list(t.partitions)) for t in r.topics] for _v, r in self.asked]


def test_each_replica_gets_its_current_and_future_directory() -> None:
    one = LogDirs({"/a": [("t", 0, 0, False)]})
    two = LogDirs({"/a": [("t", 1, 0, False), ("u", 0, 3, False)],
                   "/b": [("t", 1, 42, True)]})
    wanted = [TPR("t", 0, 1), TPR("t", 1, 2), TPR("u", 0, 2), TPR("v", 0, 2)]
    out = run_two(one, two, lambda a: a.describe_replica_log_dirs(wanted),
                  key=DESCRIBE_LOG_DIRS)
    assert out == {
        TPR("t", 0, 1): ReplicaLogDirInfo("/a", 0),
        TPR("t", 1, 2): ReplicaLogDirInfo("/a", 0, "/b", 42),  # being moved to /b
        TPR("u", 0, 2): ReplicaLogDirInfo("/a", 3),
        TPR("v", 0, 2): ReplicaLogDirInfo(),  # broker 2 holds no such replica
    }
    # each broker is asked about its replicas' partitions only
    assert one.topics_asked() == [[("t", [0])]]
    assert two.topics_asked() == [[("t", [1]), ("u", [0]), ("v", [0])]]


def test_an_offline_directory_is_skipped_and_another_directory_error_fails_its_broker() -> None:
    one = LogDirs({"/a": [("t", 0, 0, False)], "/gone": []}, errors={"/gone": KAFKA_STORAGE_ERROR})
    two = LogDirs({"/a": [("t", 1, 0, False)]}, errors={"/a": LOG_DIR_NOT_FOUND})
    out = run_two(one, two, lambda a: a.describe_replica_log_dirs(
        [TPR("t", 0, 1), TPR("t", 1, 2)], timeout=10, return_exceptions=True),
        key=DESCRIBE_LOG_DIRS)
    assert out[TPR("t", 0, 1)] == ReplicaLogDirInfo("/a", 0)
    assert isinstance(out[TPR("t", 1, 2)], ProtocolError)
    assert len(two.asked) == 1


def test_a_brokers_top_level_error_is_each_of_its_replicas_error() -> None:
    one = LogDirs({"/a": [("t", 0, 0, False)]})
    two = LogDirs({}, top=CLUSTER_AUTHORIZATION_FAILED)
    with pytest.raises(PartialFailureError) as info:
        run_two(one, two, lambda a: a.describe_replica_log_dirs(
            [TPR("t", 0, 1), TPR("t", 1, 2), TPR("u", 0, 2)], timeout=10),
            key=DESCRIBE_LOG_DIRS)
    assert set(info.value.errors) == {TPR("t", 1, 2), TPR("u", 0, 2)}
    assert all(isinstance(e, ClusterAuthorizationFailedError)
               for e in info.value.errors.values())


def test_describe_refuses_bad_replicas_and_unknown_brokers() -> None:
    one, two = LogDirs({}), LogDirs({})
    with pytest.raises(InvalidArgumentError):
        run_two(one, two, lambda a: a.describe_replica_log_dirs([TPR("t", -1, 1)]),
                key=DESCRIBE_LOG_DIRS)
    with pytest.raises(BrokerNotAvailableError):
        run_two(one, two, lambda a: a.describe_replica_log_dirs([TPR("t", 0, 9)], timeout=10),
                key=DESCRIBE_LOG_DIRS)
    assert one.asked == two.asked == []
