"""Admin operations that neither test broker implements faithfully, against crafted responses.

The request/response codecs of these APIs are round-tripped (and checked byte for byte against
kafka-python) in tests/unit/test_messages_admin_apis.py; here the admin client's building,
routing, retrying and decoding is checked against a crafted peer (see ``tests/_crafted_broker.py``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AsyncAdminClient,
    ConfigResource,
    ConsumerGroupState,
    ConsumerGroupType,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kontrakt.clients.admin._routing import Router
from kontrakt.clients.group._protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from kontrakt.errors import KafkaTimeoutError, UnsupportedVersionError
from kontrakt.protocol.errors import (
    CoordinatorLoadInProgressError,
    GroupIdNotFoundError,
    InvalidPartitionsError,
    SecurityDisabledError,
    TransactionalIdNotFoundError,
)
from kontrakt.protocol.messages import (
    AlterConfigsResponse,
    ConsumerGroupDescribeResponse,
    CreateAclsResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteAclsResponse,
    DescribeAclsResponse,
    DescribeGroupsResponse,
    DescribeLogDirsResponse,
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
    OffsetDeleteResponse,
)
from tests._crafted_broker import NODE_ID, CraftedBroker

FAST = {"retry.backoff.ms": 10, "retry.backoff.max.ms": 50, "request.timeout.ms": 3000}


def run(broker: CraftedBroker, body: Callable[[AsyncAdminClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap, **FAST}) as a:
            return await asyncio.wait_for(body(a), 20)
    return asyncio.run(main())


def test_create_topics_retries_only_the_topic_the_controller_refused() -> None:
    calls = {"n": 0}

    def create(ver: int, req: Any) -> Any:
        calls["n"] += 1
        r = CreateTopicsResponse.CreatableTopicResult
        return CreateTopicsResponse(topics=[r(
            name=t.name, num_partitions=t.num_partitions, replication_factor=1,
            error_code=41 if calls["n"] == 1 and t.name == "a" else 0) for t in req.topics])

    broker = CraftedBroker({19: create})
    out = run(broker, lambda a: a.create_topics([NewTopic("a", 2), NewTopic("b", 1)]))
    assert {k: v.num_partitions for k, v in out.items()} == {"a": 2, "b": 1}
    sent = [[t.name for t in req.topics] for key, _v, req in broker.seen if key == 19]
    assert sent == [["a", "b"], ["a"]]


def test_create_partitions_sends_counts_and_assignments_and_keeps_errors_per_topic() -> None:
    def handler(ver: int, req: Any) -> Any:
        r = CreatePartitionsResponse.CreatePartitionsTopicResult
        return CreatePartitionsResponse(results=[r(
            name=t.name, error_code=37 if t.count < 3 else 0,
            error_message="cannot shrink" if t.count < 3 else None) for t in req.topics])

    broker = CraftedBroker({37: handler})
    out = run(broker, lambda a: a.create_partitions(
        [NewPartitions("grow", 4, [[1], [1]]), NewPartitions("shrink", 2)],
        return_exceptions=True))
    assert out["grow"] is None
    assert isinstance(out["shrink"], InvalidPartitionsError)
    assert "cannot shrink" in str(out["shrink"])
    (req,) = [r for k, _v, r in broker.seen if k == 37]
    grow = req.topics[0]
    assert (grow.count, [list(a.broker_ids) for a in grow.assignments]) == (4, [[1], [1]])
    assert req.topics[1].assignments is None


def test_legacy_alter_configs_sends_the_whole_configuration() -> None:
    def handler(ver: int, req: Any) -> Any:
        r = AlterConfigsResponse.AlterConfigsResourceResponse
        return AlterConfigsResponse(responses=[r(
            resource_type=x.resource_type, resource_name=x.resource_name)
            for x in req.resources])

    broker = CraftedBroker({33: handler})
    res = ConfigResource(ConfigResource.Type.TOPIC, "t")
    out = run(broker, lambda a: a.alter_configs({res: {"retention.ms": "5", "segment.ms": "9"}}))
    assert out == {res: None}
    (req,) = [r for k, _v, r in broker.seen if k == 33]
    assert {(c.name, c.value) for c in req.resources[0].configs} == {
        ("retention.ms", "5"), ("segment.ms", "9")}


def test_describe_log_dirs_decodes_dirs_and_replicas() -> None:
    d = DescribeLogDirsResponse.DescribeLogDirsResult

    def handler(ver: int, req: Any) -> Any:
        return DescribeLogDirsResponse(results=[d(log_dir="/data/a", total_bytes=100,
                                                  usable_bytes=40, topics=[d.DescribeLogDirsTopic(
            name="t", partitions=[d.DescribeLogDirsTopic.DescribeLogDirsPartition(
                partition_index=0, partition_size=12, offset_lag=3, is_future_key=False)])]),
            d(log_dir="/data/b", error_code=56)])

    out = run(CraftedBroker({35: handler}), lambda a: a.describe_log_dirs())
    dirs = out[NODE_ID]
    assert dirs["/data/a"].replicas[TP("t", 0)].size == 12
    assert dirs["/data/a"].replicas[TP("t", 0)].offset_lag == 3
    assert (dirs["/data/a"].total_bytes, dirs["/data/a"].usable_bytes) == (100, 40)
    assert dirs["/data/a"].error is None
    assert "KAFKA_STORAGE_ERROR" in str(dirs["/data/b"].error)


def test_an_unsupported_version_answer_becomes_a_typed_error() -> None:
    def handler(ver: int, req: Any) -> Any:
        return DescribeLogDirsResponse(error_code=35)

    # One broker, one entity: its own error, not a PartialFailureError around it.
    with pytest.raises(UnsupportedVersionError):
        run(CraftedBroker({35: handler}), lambda a: a.describe_log_dirs())
    outcome = run(CraftedBroker({35: handler}),
                  lambda a: a.describe_log_dirs(return_exceptions=True))
    assert isinstance(outcome[NODE_ID], UnsupportedVersionError)


def test_an_api_the_broker_does_not_offer_is_an_unsupported_version_error_without_retries(
) -> None:
    broker = CraftedBroker({}, topics={"t": 1})
    start = time.monotonic()
    out = run(broker, lambda a: a.describe_producers([TP("t", 0)], return_exceptions=True,
                                                     timeout=10))
    assert isinstance(out[TP("t", 0)], UnsupportedVersionError)
    assert time.monotonic() - start < 5  # not retried until the timeout


def test_describe_producers_goes_to_the_leader_and_decodes_states() -> None:
    p = DescribeProducersResponse.TopicResponse

    def handler(ver: int, req: Any) -> Any:
        return DescribeProducersResponse(topics=[p(name=t.name, partitions=[
            p.PartitionResponse(partition_index=i, active_producers=[
                p.PartitionResponse.ProducerState(
                    producer_id=7, producer_epoch=2, last_sequence=9, last_timestamp=1000,
                    coordinator_epoch=1, current_txn_start_offset=-1)])
            for i in t.partition_indexes]) for t in req.topics])

    broker = CraftedBroker({61: handler}, topics={"t": 2})
    out = run(broker, lambda a: a.describe_producers([TP("t", 0), TP("t", 1)]))
    assert [s.producer_id for s in out[TP("t", 1)]] == [7]
    assert out[TP("t", 0)][0].last_sequence == 9
    # one request carries both partitions: they share a leader
    assert len([k for k, _v, _r in broker.seen if k == 61]) == 1


def test_describe_and_list_transactions() -> None:
    ts = DescribeTransactionsResponse.TransactionState

    def describe(ver: int, req: Any) -> Any:
        return DescribeTransactionsResponse(transaction_states=[
            ts(transactional_id="tx", transaction_state="Ongoing", transaction_timeout_ms=60000,
               transaction_start_time_ms=5, producer_id=3, producer_epoch=1,
               topics=[ts.TopicData(topic="t", partitions=[0, 2])]),
            ts(transactional_id="missing", error_code=105)])

    def listing(ver: int, req: Any) -> Any:
        assert list(req.state_filters) == ["Ongoing"]
        ls = ListTransactionsResponse.TransactionState
        return ListTransactionsResponse(transaction_states=[
            ls(transactional_id="tx", producer_id=3, transaction_state="Ongoing")])

    broker = CraftedBroker({65: describe, 66: listing})

    async def body(a: AsyncAdminClient) -> Any:
        described = await a.describe_transactions(["tx", "missing"], return_exceptions=True)
        listed = await a.list_transactions(states=["Ongoing"])
        return described, listed

    described, listed = run(broker, body)
    assert described["tx"].topic_partitions == (TP("t", 0), TP("t", 2))
    assert described["tx"].coordinator_id == NODE_ID
    assert isinstance(described["missing"], TransactionalIdNotFoundError)
    assert [(t.transactional_id, t.state) for t in listed] == [("tx", "Ongoing")]


def test_acls_create_describe_delete() -> None:
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    dr = DescribeAclsResponse.DescribeAclsResource
    dl = DeleteAclsResponse.DeleteAclsFilterResult

    def create(ver: int, req: Any) -> Any:
        return CreateAclsResponse(results=[CreateAclsResponse.AclCreationResult(
            error_code=0 if c.principal == "User:a" else 54) for c in req.creations])

    def describe(ver: int, req: Any) -> Any:
        return DescribeAclsResponse(resources=[dr(
            resource_type=2, resource_name="t", pattern_type=3, acls=[dr.AclDescription(
                principal="User:a", host="*", operation=3, permission_type=3)])])

    def delete(ver: int, req: Any) -> Any:
        return DeleteAclsResponse(filter_results=[dl(matching_acls=[dl.DeleteAclsMatchingAcl(
            resource_type=2, resource_name="t", pattern_type=3, principal="User:a", host="*",
            operation=3, permission_type=3)]) for _ in req.filters])

    broker = CraftedBroker({29: describe, 30: create, 31: delete})
    other = AclBinding(ResourceType.GROUP, "g", ResourcePatternType.PREFIXED, "User:b", "*",
                       AclOperation.DESCRIBE, AclPermissionType.DENY)

    async def body(a: AsyncAdminClient) -> Any:
        created = await a.create_acls([binding, other], return_exceptions=True)
        found = await a.describe_acls(AclBindingFilter(restype=ResourceType.TOPIC))
        deleted = await a.delete_acls([AclBindingFilter(principal="User:a")])
        return created, found, deleted

    created, found, deleted = run(broker, body)
    assert created[binding] is None
    assert isinstance(created[other], SecurityDisabledError)
    assert found == [binding]
    assert list(deleted.values()) == [[binding]]


def test_delete_consumer_group_offsets_decodes_partition_errors() -> None:
    r = OffsetDeleteResponse.OffsetDeleteResponseTopic

    def handler(ver: int, req: Any) -> Any:
        assert req.group_id == "g"
        return OffsetDeleteResponse(topics=[r(name="t", partitions=[
            r.OffsetDeleteResponsePartition(partition_index=0),
            r.OffsetDeleteResponsePartition(partition_index=1, error_code=86)])])

    out = run(CraftedBroker({47: handler}), lambda a: a.delete_consumer_group_offsets(
        "g", [TP("t", 0), TP("t", 1)], return_exceptions=True))
    assert out[TP("t", 0)] is None
    assert "GROUP_SUBSCRIBED_TO_TOPIC" in str(out[TP("t", 1)])


def test_describe_groups_retries_not_coordinator_and_decodes_members() -> None:
    calls = {"n": 0}
    g = DescribeGroupsResponse.DescribedGroup
    meta = encode_subscription(Subscription(["t"], owned_partitions=[TP("t", 1)],
                                            rack_id="r1"), 3)
    assign = encode_assignment(Assignment([TP("t", 0), TP("t", 1)], b"ud"), 1)

    def handler(ver: int, req: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            return DescribeGroupsResponse(groups=[g(group_id=x, error_code=16)
                                                  for x in req.groups])
        return DescribeGroupsResponse(groups=[g(
            group_id=x, group_state="Stable", protocol_type="consumer", protocol_data="range",
            members=[g.DescribedGroupMember(member_id="m1", client_id="c", client_host="/h",
                                            member_metadata=meta, member_assignment=assign)])
            for x in req.groups])

    out = run(CraftedBroker({15: handler}), lambda a: a.describe_consumer_groups(["grp"]))
    desc = out["grp"]
    assert calls["n"] == 2
    assert desc.state is ConsumerGroupState.STABLE
    assert desc.partition_assignor == "range"
    assert desc.coordinator is not None and desc.coordinator.id == NODE_ID
    (m,) = desc.members
    assert m.subscription == ("t",)
    assert m.owned_partitions == (TP("t", 1),)
    assert m.rack_id == "r1"
    assert m.assignment.topic_partitions == (TP("t", 0), TP("t", 1))
    assert m.assignment.user_data == b"ud"


_CGD = ConsumerGroupDescribeResponse.DescribedGroup
_CGD_TPS = _CGD.Member.ConsumerGroupDescribeAssignment


def _cgd_assignment(topic: str, partitions: list[int]) -> Any:
    return _CGD_TPS(topic_partitions=[_CGD_TPS.ConsumerGroupDescribeTopicPartitions(
        topic_id=uuid.UUID(int=7), topic_name=topic, partitions=partitions)])


def _classic(ver: int, req: Any) -> Any:
    """DescribeGroups: every group but ``gone`` is a Stable classic group with no members."""
    g = DescribeGroupsResponse.DescribedGroup
    return DescribeGroupsResponse(groups=[
        g(group_id=x, error_code=69) if x == "gone" else
        g(group_id=x, group_state="Stable", protocol_type="consumer", protocol_data="range")
        for x in req.groups])


def test_describe_groups_asks_consumer_group_describe_first_and_falls_back_per_group() -> None:
    # Java's DescribeConsumerGroupsHandler: ConsumerGroupDescribe for every group; a group
    # it answers GROUP_ID_NOT_FOUND is asked again with DescribeGroups, and if that finds
    # none either the error keeps ConsumerGroupDescribe's message.
    def describe(ver: int, req: Any) -> Any:
        out = []
        for x in req.group_ids:
            if x != "new":
                out.append(_CGD(group_id=x, error_code=69, error_message=f"{x}: not KIP-848",
                                group_state="", assignor_name=""))
                continue
            out.append(_CGD(
                group_id=x, group_state="Reconciling", group_epoch=9, assignment_epoch=8,
                assignor_name="uniform", members=[_CGD.Member(
                    member_id="m1", instance_id="i1", rack_id="r1", member_epoch=7,
                    client_id="c", client_host="/h", subscribed_topic_names=["t"],
                    assignment=_cgd_assignment("t", [2]),
                    target_assignment=_cgd_assignment("t", [2, 0]), member_type=1)]))
        return ConsumerGroupDescribeResponse(groups=out)

    broker = CraftedBroker({69: describe, 15: _classic})
    out = run(broker, lambda a: a.describe_consumer_groups(["new", "old", "gone"],
                                                           return_exceptions=True))
    assert [(k, r.group_ids if k == 69 else r.groups) for k, _v, r in broker.seen] == [
        (69, ["new", "old", "gone"]), (15, ["old", "gone"])]
    new = out["new"]
    assert (new.type, new.state, new.partition_assignor, new.group_epoch,
            new.target_assignment_epoch, new.protocol_type, new.is_simple_consumer_group) == (
        ConsumerGroupType.CONSUMER, ConsumerGroupState.RECONCILING, "uniform", 9, 8,
        "consumer", False)
    assert new.coordinator is not None and new.coordinator.id == NODE_ID
    (m,) = new.members
    assert (m.member_id, m.group_instance_id, m.client_id, m.host, m.rack_id,
            m.subscription, m.member_epoch, m.upgraded) == (
        "m1", "i1", "c", "/h", "r1", ("t",), 7, True)
    assert m.assignment.topic_partitions == (TP("t", 2),)
    assert m.target_assignment is not None
    assert m.target_assignment.topic_partitions == (TP("t", 0), TP("t", 2))
    old = out["old"]
    assert (old.type, old.state, old.group_epoch, old.partition_assignor) == (
        ConsumerGroupType.CLASSIC, ConsumerGroupState.STABLE, None, "range")
    assert isinstance(out["gone"], GroupIdNotFoundError)
    assert "gone: not KIP-848" in str(out["gone"])


@pytest.mark.parametrize("answer", ["not advertised", "unsupported", "epoch -1"])
def test_describe_groups_without_consumer_group_describe_uses_describe_groups(
        answer: str) -> None:
    # Not advertised: a coordinator before Kafka 3.7 (Java: handleUnsupportedVersionException);
    # advertised but answering UNSUPPORTED_VERSION for the group: Java falls back too.
    # Epoch -1 and no error: what Tansu answers for any group id (no Kafka group has it).
    def describe(ver: int, req: Any) -> Any:
        return ConsumerGroupDescribeResponse(groups=[_CGD(
            group_id=x, error_code=35 if answer == "unsupported" else 0,
            group_state="Empty", group_epoch=-1, assignment_epoch=-1, assignor_name="")
            for x in req.group_ids])

    advertised = answer != "not advertised"
    broker = CraftedBroker({69: describe, 15: _classic} if advertised else {15: _classic})
    out = run(broker, lambda a: a.describe_consumer_groups(["old"]))
    assert [k for k, _v, _r in broker.requests if k in (15, 69)] == (
        [69, 15] if advertised else [15])
    assert (out["old"].type, out["old"].state) == (ConsumerGroupType.CLASSIC,
                                                  ConsumerGroupState.STABLE)


def test_a_failed_describe_groups_fails_only_the_groups_it_was_asked_about() -> None:
    # A broker with ConsumerGroupDescribe but no DescribeGroups: the KIP-848 group stays
    # described; the one it did not know fails with the negotiation's error.
    def describe(ver: int, req: Any) -> Any:
        return ConsumerGroupDescribeResponse(groups=[_CGD(
            group_id=x, error_code=69 if x == "old" else 0, group_state="Empty",
            assignor_name="uniform") for x in req.group_ids])

    out = run(CraftedBroker({69: describe}), lambda a: a.describe_consumer_groups(
        ["new", "old"], return_exceptions=True))
    assert out["new"].type is ConsumerGroupType.CONSUMER
    assert isinstance(out["old"], UnsupportedVersionError)


def test_describe_groups_retries_consumer_group_describe_after_not_coordinator() -> None:
    # A retriable error is no sign of a classic group: the retry asks ConsumerGroupDescribe
    # again (Java unmaps the key and keeps the API).
    calls = {"n": 0}

    def describe(ver: int, req: Any) -> Any:
        calls["n"] += 1
        return ConsumerGroupDescribeResponse(groups=[_CGD(
            group_id=x, error_code=16 if calls["n"] == 1 else 0, group_state="Empty",
            group_epoch=3, assignment_epoch=3, assignor_name="range")
            for x in req.group_ids])

    broker = CraftedBroker({69: describe, 15: _classic})
    out = run(broker, lambda a: a.describe_consumer_groups(["new"]))
    assert [k for k, _v, _r in broker.seen] == [69, 69]
    assert (out["new"].type, out["new"].state, out["new"].members) == (
        ConsumerGroupType.CONSUMER, ConsumerGroupState.EMPTY, ())


def test_a_retriable_error_that_persists_ends_at_the_call_timeout() -> None:
    def handler(ver: int, req: Any) -> Any:
        g = DescribeGroupsResponse.DescribedGroup
        return DescribeGroupsResponse(groups=[g(group_id=x, error_code=14) for x in req.groups])

    broker = CraftedBroker({15: handler})
    start = time.monotonic()
    with pytest.raises(CoordinatorLoadInProgressError):
        run(broker, lambda a: a.describe_consumer_groups(["grp"], timeout=0.5))
    elapsed = time.monotonic() - start
    assert 0.4 < elapsed < 3
    assert len(broker.seen) >= 2


def test_a_retry_the_deadline_cuts_short_keeps_the_error_it_retried() -> None:
    # What the test above meets when the machine is slow: the backoff ends past the deadline
    # (or the last attempt times out), and the round's outcome is the call's timeout. The
    # retried error stays the outcome; an entity that only ever timed out keeps its timeout.
    class _Client:
        config = {"retry.backoff.ms": 1, "retry.backoff.max.ms": 1}

    router = Router(_Client(), 1.0)  # type: ignore[arg-type]
    rounds: list[list[str]] = []

    async def round_(pending: list[str]) -> dict[str, Any]:
        rounds.append(list(pending))
        if len(rounds) == 1:
            return {"loading": CoordinatorLoadInProgressError("grp"),
                    "slow": KafkaTimeoutError("first attempt")}
        await asyncio.sleep(max(0.0, deadline - time.monotonic()) + 0.01)
        return {e: KafkaTimeoutError("DescribeGroups: the call's timeout expired")
                for e in pending}

    deadline = time.monotonic() + 0.1
    out = asyncio.run(router.per_entity(["loading", "slow"], round_, deadline))
    assert rounds == [["loading", "slow"], ["loading", "slow"]]
    assert isinstance(out["loading"], CoordinatorLoadInProgressError)
    assert isinstance(out["slow"], KafkaTimeoutError)

    # The same for a single call.
    attempts: list[float] = []

    async def attempt() -> None:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            raise CoordinatorLoadInProgressError("grp")
        await asyncio.sleep(max(0.0, deadline - time.monotonic()) + 0.01)
        raise KafkaTimeoutError("the call's timeout expired")

    deadline = time.monotonic() + 0.1
    with pytest.raises(CoordinatorLoadInProgressError):
        asyncio.run(router.call(attempt, deadline))
    assert len(attempts) == 2


def test_sync_admin_client_bridges_the_async_one() -> None:
    def handler(ver: int, req: Any) -> Any:
        return DescribeLogDirsResponse(results=[
            DescribeLogDirsResponse.DescribeLogDirsResult(log_dir="/d")])

    async def main() -> Any:
        async with CraftedBroker({35: handler}) as broker:
            def blocking() -> Any:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    return admin.describe_log_dirs()
            return await asyncio.to_thread(blocking)

    assert list(asyncio.run(main())[NODE_ID]) == ["/d"]
