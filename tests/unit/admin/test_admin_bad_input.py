"""Bad admin input raises InvalidArgumentError before anything is sent.

The client points at a port nobody listens on: if a check let the call through, it would end
in NoBrokersAvailableError/KafkaConnectionError instead of InvalidArgumentError.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AlterConfigOp,
    AlterConfigOpType,
    AsyncAdminClient,
    ConfigResource,
    ElectionType,
    FeatureUpdate,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)
from kontrakt.errors import ConfigError, InvalidArgumentError


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check(call: Callable[[AsyncAdminClient], Awaitable[Any]], match: str) -> None:
    async def main() -> None:
        admin = AsyncAdminClient(bootstrap_servers=f"127.0.0.1:{_dead_port()}",
                                 request_timeout_ms=500)
        try:
            with pytest.raises(InvalidArgumentError, match=match):
                await call(admin)
        finally:
            await admin.close()
    asyncio.run(main())


TOPIC = ConfigResource(ConfigResource.Type.TOPIC, "t")
ACL = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*",
                 AclOperation.READ, AclPermissionType.ALLOW)

CASES: list[tuple[str, Callable[[AsyncAdminClient], Awaitable[Any]], str]] = [
    ("empty topic", lambda a: a.create_topics([NewTopic("", 1)]), "empty"),
    ("dot topic", lambda a: a.create_topics([NewTopic("..", 1)]), "cannot be"),
    ("bad chars", lambda a: a.create_topics([NewTopic("a b/c", 1)]), "illegal characters"),
    ("too long", lambda a: a.create_topics([NewTopic("x" * 250, 1)]), "249"),
    ("zero partitions", lambda a: a.create_topics([NewTopic("t", 0)]), "num_partitions"),
    ("negative partitions", lambda a: a.create_topics([NewTopic("t", -5)]), "num_partitions"),
    ("bad replication", lambda a: a.create_topics([NewTopic("t", 1, 0)]), "replication"),
    ("assignment and rf", lambda a: a.create_topics(
        [NewTopic("t", replication_factor=2, replica_assignment=[[1, 2]])]), "excludes"),
    ("ragged assignment", lambda a: a.create_topics(
        [NewTopic("t", replica_assignment=[[1, 2], [1]])]), "different replica counts"),
    ("repeated replica", lambda a: a.create_topics(
        [NewTopic("t", replica_assignment=[[1, 1]])]), "repeats"),
    ("unknown config", lambda a: a.create_topics(
        [NewTopic("t", 1, config={"retention.msec": "1"})]), "did you mean retention.ms"),
    ("non-str config", lambda a: a.create_topics(
        [NewTopic("t", 1, config={"retention.ms": 5})]), "str value"),  # type: ignore[dict-item]
    ("duplicate topic", lambda a: a.create_topics([NewTopic("t", 1), NewTopic("t", 2)]),
     "more than once"),
    ("delete bad name", lambda a: a.delete_topics(["ok", "bad name"]), "illegal"),
    ("describe empty", lambda a: a.describe_topics([""]), "empty"),
    ("grow to zero", lambda a: a.create_partitions([NewPartitions("t", 0)]), ">= 1"),
    ("broker name", lambda a: a.describe_configs(
        [ConfigResource(ConfigResource.Type.BROKER, "b1")]), "numeric"),
    ("alter unknown key", lambda a: a.incremental_alter_configs(
        {TOPIC: [AlterConfigOp("no.such.config", "1")]}), "unknown topic config"),
    ("set without value", lambda a: a.incremental_alter_configs(
        {TOPIC: [AlterConfigOp("retention.ms", None, AlterConfigOpType.SET)]}), "needs a value"),
    ("legacy unknown key", lambda a: a.alter_configs({TOPIC: {"retension.ms": "1"}}),
     "unknown topic config"),
    ("empty group", lambda a: a.describe_consumer_groups([""]), "group id is empty"),
    ("delete empty group", lambda a: a.delete_consumer_groups(["g", ""]), "group id"),
    ("offsets of empty group", lambda a: a.list_consumer_group_offsets(""), "group id"),
    ("negative offset", lambda a: a.alter_consumer_group_offsets("g", {TP("t", 0): -3}),
     ">= 0"),
    ("negative partition", lambda a: a.list_offsets({TP("t", -1): OffsetSpec.latest()}),
     ">= 0"),
    ("bad spec", lambda a: a.list_offsets({TP("t", 0): 5}), "OffsetSpec"),  # type: ignore
    ("delete records below -1", lambda a: a.delete_records({TP("t", 0): -2}), ">= -1"),
    ("acl with ANY", lambda a: a.create_acls([AclBinding(
        ResourceType.ANY, "t", ResourcePatternType.LITERAL, "User:a", "*", AclOperation.READ,
        AclPermissionType.ALLOW)]), "restype"),
    ("acl empty principal", lambda a: a.create_acls([AclBinding(
        ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "", "*", AclOperation.READ,
        AclPermissionType.ALLOW)]), "empty"),
    ("empty txn id", lambda a: a.describe_transactions([""]), "transactional id"),
    ("election type as int", lambda a: a.elect_leaders(0, [TP("t", 0)]),  # type: ignore[arg-type]
     "ElectionType"),
    ("elect tuple", lambda a: a.elect_leaders(ElectionType.PREFERRED, [("t", 0)]),  # type: ignore[list-item]
     "TopicPartition"),
    ("elect twice", lambda a: a.elect_leaders(ElectionType.PREFERRED, [TP("t", 0), TP("t", 0)]),
     "more than once"),
    ("reassign empty", lambda a: a.alter_partition_reassignments({TP("t", 0): []}),
     "broker ids"),
    ("reassign repeat", lambda a: a.alter_partition_reassignments({TP("t", 0): [1, 1]}),
     "repeats"),
    ("list reassign bad partition", lambda a: a.list_partition_reassignments([TP("t", -1)]),
     "partition"),
    ("features none", lambda a: a.update_features({}), "no updates"),
    ("feature delete as upgrade", lambda a: a.update_features({"f": FeatureUpdate(0)}),
     "downgrade"),
    ("feature not an update", lambda a: a.update_features({"f": 3}),  # type: ignore[dict-item]
     "FeatureUpdate"),
]


@pytest.mark.parametrize(("name", "call", "match"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_before_sending(
        name: str, call: Callable[[AsyncAdminClient], Awaitable[Any]], match: str) -> None:
    _check(call, match)


def test_vendor_prefixed_topic_configs_pass_the_check() -> None:
    from kontrakt.clients.admin._validate import check_topic_config
    check_topic_config("t", "confluent.placement.constraints", "{}")
    with pytest.raises(InvalidArgumentError):
        check_topic_config("t", "placement.constraints", "{}")


def test_unknown_admin_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        AsyncAdminClient(bootstrap_servers="127.0.0.1:9", default_api_timeout=5)


def test_offset_spec_and_config_resource_parsing() -> None:
    assert OffsetSpec.earliest().timestamp == -2
    assert OffsetSpec.max_timestamp().timestamp == -3
    with pytest.raises(ValueError):
        OffsetSpec.for_timestamp(-1)
    assert ConfigResource("topic", "t") == TOPIC  # type: ignore[arg-type]
    assert hash(ConfigResource("TOPIC", "t")) == hash(TOPIC)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ConfigResource("planet", "x")  # type: ignore[arg-type]
    assert ACL in {ACL}
