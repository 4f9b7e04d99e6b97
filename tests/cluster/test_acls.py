"""ACLs on the in-process cluster (``Cluster(authorizer=True)``): CreateAcls / DescribeAcls /
DeleteAcls through Kontrakt's, confluent-kafka's and kafka-python's admin clients, and the
checks Kafka's StandardAuthorizer makes on produce, consume, metadata, groups, topic admin
and transactions, for SASL users. Neither test broker serves ACLs (Tansu answers none of the
three APIs, the mock cluster has no admin APIs), so the expected results are Kafka's
documented semantics."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from kontrakt import Consumer, Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)
from kontrakt.errors import InvalidArgumentError, PartialFailureError, ProduceError
from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import MetadataRequest
from kontrakt.testing import Cluster, send_request
from kontrakt.testing._cluster._acls import AclBinding as Stored
from kontrakt.testing._cluster._acls import AclStore
from kontrakt.testing._cluster._state import RequestContext

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.admin

import confluent_kafka
import confluent_kafka.admin as ck_admin

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SASL = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256")
ADMIN = dict(SASL, sasl_username="admin", sasl_password="admin-secret")
ALICE = dict(SASL, sasl_username="alice", sasl_password="alice-secret")
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


@pytest.fixture
def secured(topic: str) -> Iterator[Cluster]:
    with Cluster(2, sasl_users=USERS, authorizer=True, super_users=["User:admin"]) as c:
        c.create_topic(topic, partitions=1)
        yield c
        assert c.internal_errors() == []


def _acl(restype: ResourceType, name: str, op: AclOperation,
         perm: AclPermissionType = ALLOW, pattern: ResourcePatternType = LIT,
         principal: str = "User:alice") -> AclBinding:
    return AclBinding(restype, name, pattern, principal, "*", op, perm)


def _admin(cluster: Cluster, **auth: str) -> AdminClient:
    return AdminClient(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=20,
                       **auth)


# --- the decision ---------------------------------------------------------------------------
def test_standard_authorizer_rules() -> None:
    """Deny wins; READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
    DESCRIBE_CONFIGS (an ALLOW does, a DENY of READ does not deny DESCRIBE); prefixes,
    ``*`` names and ``User:*`` match; hosts are checked; super users pass; a resource without
    ACLs is closed unless allow.everyone.if.no.acl.found."""
    store = AclStore(super_users=("User:root",))
    alice = RequestContext(1, None, "127.0.0.1", "User:alice")
    for b in (Stored(2, "orders", 3, "User:alice", "*", 3, 3),       # READ orders
              Stored(2, "pay-", 4, "User:*", "*", 4, 3),             # WRITE pay-*
              Stored(2, "pay-secret", 3, "User:alice", "*", 2, 2),   # DENY ALL
              Stored(2, "*", 3, "User:alice", "10.0.0.1", 6, 3),     # DELETE, other host
              Stored(2, "cfg", 3, "User:alice", "*", 11, 3)):        # ALTER_CONFIGS
        store.bindings[b] = None
    ok = store.authorized
    assert ok(alice, 2, "orders", 3) and ok(alice, 2, "orders", 8)
    assert not ok(alice, 2, "orders", 4)
    assert ok(alice, 2, "pay-in", 4) and ok(alice, 2, "pay-in", 8)
    assert not ok(alice, 2, "pay-secret", 4) and not ok(alice, 2, "pay-secret", 8)
    assert not ok(alice, 2, "orders", 6)  # the DELETE binding is for another host
    assert ok(alice, 2, "cfg", 10) and not ok(alice, 2, "cfg", 8)
    assert not ok(alice, 2, "unnamed", 8)
    assert ok(RequestContext(1, None, "h", "User:root"), 2, "pay-secret", 4)
    store.bindings[Stored(2, "orders", 3, "User:alice", "*", 3, 2)] = None  # DENY READ
    assert not ok(alice, 2, "orders", 3) and ok(alice, 2, "orders", 8)
    assert AclStore(allow_everyone_if_no_acl_found=True).authorized(alice, 2, "x", 4)
    assert store.authorized_any(alice, 2, 4)  # WRITE on pay-* : idempotent producers
    assert not AclStore().authorized_any(alice, 2, 4)


# --- the three APIs -------------------------------------------------------------------------
def test_kontrakt_admin_creates_describes_and_deletes_acls(secured: Cluster) -> None:
    read = _acl(ResourceType.TOPIC, "orders", AclOperation.READ)
    write = _acl(ResourceType.TOPIC, "pay-", AclOperation.WRITE, pattern=PRE)
    deny = _acl(ResourceType.GROUP, "g", AclOperation.ALL, DENY, principal="User:bob")
    with _admin(secured, **ADMIN) as a:
        assert a.create_acls([read, write, deny]) == {read: None, write: None, deny: None}
        assert set(a.describe_acls()) == {read, write, deny}
        assert a.describe_acls(AclBindingFilter(restype=ResourceType.TOPIC,
                                                resource_pattern_type=PRE)) == [write]
        # MATCH: every binding that applies to the named resource
        assert a.describe_acls(AclBindingFilter(
            name="pay-in", resource_pattern_type=ResourcePatternType.MATCH)) == [write]
        assert a.describe_acls(AclBindingFilter(principal="User:bob")) == [deny]
        assert a.delete_acls([AclBindingFilter(restype=ResourceType.TOPIC)]) == {
            AclBindingFilter(restype=ResourceType.TOPIC): [read, write]}
        assert a.describe_acls() == [deny]
        bad = _acl(ResourceType.CLUSTER, "not-the-cluster", AclOperation.ALTER)
        with pytest.raises(E.InvalidRequestError):
            a.create_acls([bad])
    with _admin(secured, **ALICE) as a:  # not a super user, no ALTER on the cluster
        with pytest.raises(E.ClusterAuthorizationFailedError):
            a.create_acls([read])
        with pytest.raises(E.ClusterAuthorizationFailedError):
            a.describe_acls()


def test_confluent_kafka_admin_acls(secured: Cluster) -> None:
    admin = ck_admin.AdminClient({
        "bootstrap.servers": secured.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
        "sasl.password": "admin-secret"})
    binding = ck_admin.AclBinding(
        ck_admin.ResourceType.TOPIC, "orders", ck_admin.ResourcePatternType.PREFIXED,
        "User:alice", "*", ck_admin.AclOperation.READ, ck_admin.AclPermissionType.ALLOW)
    for fut in admin.create_acls([binding], request_timeout=10).values():
        assert fut.result(10) is None
    any_filter = ck_admin.AclBindingFilter(
        ck_admin.ResourceType.ANY, None, ck_admin.ResourcePatternType.ANY, None, None,
        ck_admin.AclOperation.ANY, ck_admin.AclPermissionType.ANY)
    assert admin.describe_acls(any_filter, request_timeout=10).result(10) == [binding]
    deleted = admin.delete_acls([any_filter], request_timeout=10)
    assert [f.result(10) for f in deleted.values()] == [[binding]]
    assert admin.describe_acls(any_filter, request_timeout=10).result(10) == []


def test_kafka_python_admin_acls(secured: Cluster) -> None:
    admin = kafka.KafkaAdminClient(
        bootstrap_servers=secured.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username="admin",
        sasl_plain_password="admin-secret", request_timeout_ms=10_000)
    try:
        acl = kafka.admin.ACL("User:alice", "*", kafka.admin.ACLOperation.WRITE,
                              kafka.admin.ACLPermissionType.ALLOW,
                              kafka.admin.ResourcePattern(kafka.admin.ResourceType.TOPIC,
                                                          "events"))
        result = admin.create_acls([acl])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        found, error = admin.describe_acls(kafka.admin.ACLFilter(
            "User:alice", None, kafka.admin.ACLOperation.ANY,
            kafka.admin.ACLPermissionType.ANY,
            kafka.admin.ResourcePatternFilter(kafka.admin.ResourceType.TOPIC, None,
                                              kafka.admin.ACLResourcePatternType.ANY)))
        assert error.errno == 0 and found == [acl]
    finally:
        admin.close()


# --- enforcement ----------------------------------------------------------------------------
def test_sasl_user_denied_then_allowed_to_produce_and_consume(secured: Cluster,
                                                              topic: str) -> None:
    """Alice may DESCRIBE the topic (so Metadata answers it) but not WRITE or READ it until
    the admin adds the ACLs; her produce and fetch fail with TOPIC_AUTHORIZATION_FAILED."""
    bs = secured.bootstrap_servers
    with _admin(secured, **ADMIN) as a:
        a.create_acls([_acl(ResourceType.TOPIC, topic, AclOperation.DESCRIBE)])
    with Producer(bootstrap_servers=bs, max_block_ms=5000, enable_idempotence=False,
                  **ALICE) as p:
        with pytest.raises(ProduceError) as failed:
            p.send_and_wait(topic, b"no", partition=0)
        assert isinstance(failed.value.cause, E.TopicAuthorizationFailedError)
        with _admin(secured, **ADMIN) as a:
            a.create_acls([_acl(ResourceType.TOPIC, topic, AclOperation.WRITE)])
        assert p.send_and_wait(topic, b"yes", partition=0).offset == 0
    consume = dict(bootstrap_servers=bs, auto_offset_reset="earliest", **ALICE)
    with Consumer(**consume) as c:  # no group: the Fetch itself is refused
        c.assign([TP(topic, 0)])
        with pytest.raises(E.TopicAuthorizationFailedError):
            c.poll(5)
    with _admin(secured, **ADMIN) as a:
        a.create_acls([_acl(ResourceType.TOPIC, topic, AclOperation.READ),
                       _acl(ResourceType.GROUP, "g", AclOperation.READ, pattern=PRE)])
    with Consumer(**consume, group_id="g1") as c:
        c.subscribe([topic])
        r = c.poll(10)
        assert r is not None and r.value == b"yes"
        c.commit()
        assert c.committed([TP(topic, 0)])[TP(topic, 0)].offset == 1


def test_metadata_hides_or_refuses_topics_without_describe(secured: Cluster,
                                                           topic: str) -> None:
    secured.create_topic("visible", partitions=1)
    with _admin(secured, **ADMIN) as a:
        a.create_acls([_acl(ResourceType.TOPIC, "visible", AclOperation.READ)])
    with _admin(secured, **ALICE) as a:
        assert set(a.list_topics()) == {"visible"}
        with pytest.raises(PartialFailureError):
            a.create_topics([NewTopic("new-a", 1, 1), NewTopic("new-b", 1, 1)])
    with _admin(secured, **ADMIN) as a:
        assert set(a.list_topics()) >= {"visible", topic}
    c = confluent_kafka.Consumer({
        "bootstrap.servers": secured.bootstrap_servers, "group.id": "x",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "alice-secret"})
    try:
        meta = c.list_topics(topic, timeout=10)
        assert meta.topics[topic].error.code() == E.TopicAuthorizationFailedError.code
    finally:
        c.close()


def test_transactional_id_and_group_need_acls(secured: Cluster, topic: str) -> None:
    """A transactional producer needs WRITE on its transactional id (and on the topic), an
    idempotent one WRITE on some topic; describing a group needs DESCRIBE on it."""
    bs = secured.bootstrap_servers
    with _admin(secured, **ALICE) as a, pytest.raises(E.GroupAuthorizationFailedError):
        a.describe_consumer_groups(["g1"])
    with Producer(bootstrap_servers=bs, transactional_id="tx-1", max_block_ms=5000,
                  **ALICE) as p, pytest.raises(E.TransactionalIdAuthorizationFailedError):
        p.init_transactions()
    with _admin(secured, **ADMIN) as a:
        a.create_acls([_acl(ResourceType.TRANSACTIONAL_ID, "tx-", AclOperation.WRITE,
                            pattern=PRE),
                       _acl(ResourceType.TOPIC, topic, AclOperation.WRITE)])
    with Producer(bootstrap_servers=bs, transactional_id="tx-1", max_block_ms=5000,
                  **ALICE) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"in-txn", partition=0)
        p.commit_transaction()
    assert secured.end_offsets(topic) == [2]  # the record and the commit marker


def test_topic_admin_and_offsets_need_their_operations(secured: Cluster, topic: str) -> None:
    """With DESCRIBE on the topic only, alice may list its offsets but not grow it or delete
    records; with READ on one group and not another, a describe of both fails for one."""
    with _admin(secured, **ADMIN) as a:
        a.create_acls([_acl(ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
                       _acl(ResourceType.GROUP, "mine", AclOperation.READ)])
    tp = TP(topic, 0)
    with _admin(secured, **ALICE) as a:
        assert a.list_offsets({tp: OffsetSpec.latest()})[tp].offset == 0
        with pytest.raises(E.TopicAuthorizationFailedError):
            a.create_partitions([NewPartitions(topic, 2)])
        with pytest.raises(E.TopicAuthorizationFailedError):
            a.delete_records({tp: 0})
        described = a.describe_consumer_groups(["mine", "theirs"], return_exceptions=True)
        # "mine" passes authorization and is reported as the unknown group it is
        assert isinstance(described["mine"], E.GroupIdNotFoundError)
        assert isinstance(described["theirs"], E.GroupAuthorizationFailedError)
    assert secured.end_offsets(topic) == [0]  # still one partition


def test_configs_need_describe_and_alter_configs(secured: Cluster, topic: str) -> None:
    """DescribeConfigs needs DESCRIBE_CONFIGS (implied by ALTER_CONFIGS), the alter APIs
    ALTER_CONFIGS: on the topic, or on the cluster for a broker's configs."""
    topic_res = ConfigResource("topic", topic)
    broker_res = ConfigResource("broker", "1")
    retention = {topic_res: [AlterConfigOp("retention.ms", "1000")]}
    with _admin(secured, **ADMIN) as a:
        a.create_acls([_acl(ResourceType.TOPIC, topic, AclOperation.DESCRIBE)])
    with _admin(secured, **ALICE) as a:
        with pytest.raises(E.TopicAuthorizationFailedError):
            a.describe_configs([topic_res])
        with pytest.raises(E.ClusterAuthorizationFailedError):
            a.describe_configs([broker_res])
        with pytest.raises(E.TopicAuthorizationFailedError):
            a.incremental_alter_configs(retention)
    with _admin(secured, **ADMIN) as a:
        a.create_acls([_acl(ResourceType.TOPIC, topic, AclOperation.ALTER_CONFIGS)])
    with _admin(secured, **ALICE) as a:
        a.incremental_alter_configs(retention)
        assert a.describe_configs([topic_res])[topic_res]["retention.ms"].value == "1000"


@pytest.mark.parametrize("bad", ["alice", ["alice"], [":alice"], ["User:"]])
def test_super_users_must_be_principals(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="super_users"):
        Cluster(authorizer=True, super_users=bad)  # type: ignore[arg-type]


def test_committed_offsets_of_denied_topics_are_hidden(secured: Cluster, topic: str) -> None:
    """OffsetFetch: a whole-group fetch leaves out topics alice may not DESCRIBE; asking
    for their partitions gives TOPIC_AUTHORIZATION_FAILED."""
    secured.create_topic("hidden", partitions=1)
    mine, hidden = TP(topic, 0), TP("hidden", 0)
    with _admin(secured, **ADMIN) as a:
        a.alter_consumer_group_offsets("g", {mine: 3, hidden: 5})
        a.create_acls([_acl(ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
                       _acl(ResourceType.GROUP, "g", AclOperation.DESCRIBE)])
        assert set(a.list_consumer_group_offsets("g")) == {mine, hidden}
    with _admin(secured, **ALICE) as a:
        seen = a.list_consumer_group_offsets("g")
        assert set(seen) == {mine} and seen[mine] is not None and seen[mine].offset == 3
        with pytest.raises(E.TopicAuthorizationFailedError):
            a.list_consumer_group_offsets("g", [hidden])


def test_authorized_operations_are_reported(secured: Cluster, topic: str) -> None:
    """DescribeCluster and DescribeGroups report the operations the principal may do
    (Kafka's supported operations of each resource type, filtered by the authorizer)."""
    with _admin(secured, **ADMIN) as a:
        a.create_acls([_acl(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE),
                       _acl(ResourceType.GROUP, "g", AclOperation.READ),
                       _acl(ResourceType.TOPIC, topic, AclOperation.WRITE)])
        a.alter_consumer_group_offsets("g", {TP(topic, 0): 0})  # the group exists, empty
        everything = a.describe_cluster(include_authorized_operations=True)
        assert everything.authorized_operations == {
            AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
            AclOperation.DESCRIBE}
    with _admin(secured, **ALICE) as a:
        assert a.describe_cluster(include_authorized_operations=True
                                  ).authorized_operations == {AclOperation.DESCRIBE}
        group = a.describe_consumer_groups(["g"], include_authorized_operations=True)["g"]
        assert group.authorized_operations == {AclOperation.READ, AclOperation.DESCRIBE}


def test_authorized_operations_without_an_authorizer(cluster: Cluster) -> None:
    """Without an authorizer Kafka reports every supported operation."""
    cluster.create_topic("t", partitions=1)
    address = cluster.bootstrap_servers.split(",")[0]
    meta = send_request(address, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="t")],
        include_topic_authorized_operations=True), 12)
    ops = meta.topics[0].topic_authorized_operations
    assert {op for op in AclOperation if ops & (1 << op)} == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as a:
        assert AclOperation.IDEMPOTENT_WRITE in a.describe_cluster(
            include_authorized_operations=True).authorized_operations
