"""Client quotas on the in-process cluster (stored, not applied): AlterClientQuotas and
DescribeClientQuotas through Kontrakt's admin client, with Kafka's entity matching (exact
name, default entity, any name; strict filters), validate_only and its validation errors.
Neither test broker serves these APIs, so the expected results are Kafka's documented
semantics (KIP-546)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kontrakt.clients.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ResourcePatternType,
    ResourceType,
)
from kontrakt.errors import PartialFailureError
from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import DescribeClientQuotasRequest
from kontrakt.testing import Cluster, send_request

C = ClientQuotaFilterComponent
ALICE = ClientQuotaEntity({"user": "alice"})
ALICE_APP = ClientQuotaEntity({"user": "alice", "client-id": "app"})
DEFAULT_USER = ClientQuotaEntity({"user": None})
LOCAL_IP = ClientQuotaEntity({"ip": "127.0.0.1"})


@pytest.fixture
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=20) as a:
        yield a


def test_alter_then_describe_with_kafkas_entity_matching(admin: AdminClient) -> None:
    admin.alter_client_quotas([
        ClientQuotaAlteration(ALICE, {"producer_byte_rate": 1024, "request_percentage": 50}),
        ClientQuotaAlteration(ALICE_APP, {"consumer_byte_rate": 2048}),
        ClientQuotaAlteration(DEFAULT_USER, {"producer_byte_rate": 512}),
        ClientQuotaAlteration(LOCAL_IP, {"connection_creation_rate": 10})])
    everything = admin.describe_client_quotas()
    assert everything == {
        ALICE: {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
        ALICE_APP: {"consumer_byte_rate": 2048.0},
        DEFAULT_USER: {"producer_byte_rate": 512.0},
        LOCAL_IP: {"connection_creation_rate": 10.0}}
    # non-strict: entities having at least these components
    assert set(admin.describe_client_quotas(ClientQuotaFilter.contains(
        [C.of_entity("user", "alice")]))) == {ALICE, ALICE_APP}
    # strict: exactly these components
    assert set(admin.describe_client_quotas(ClientQuotaFilter.contains_only(
        [C.of_entity("user", "alice")]))) == {ALICE}
    assert set(admin.describe_client_quotas(ClientQuotaFilter.contains(
        [C.of_default_entity("user")]))) == {DEFAULT_USER}
    assert set(admin.describe_client_quotas(ClientQuotaFilter.contains_only(
        [C.of_entity_type("user")]))) == {ALICE, DEFAULT_USER}
    assert set(admin.describe_client_quotas(ClientQuotaFilter.contains(
        [C.of_entity_type("client-id")]))) == {ALICE_APP}
    # removing a key; removing the last key forgets the entity
    admin.alter_client_quotas([ClientQuotaAlteration(ALICE, {"request_percentage": None}),
                               ClientQuotaAlteration(ALICE_APP, {"consumer_byte_rate": None})])
    after = admin.describe_client_quotas()
    assert after[ALICE] == {"producer_byte_rate": 1024.0} and ALICE_APP not in after


def test_validate_only_and_invalid_alterations(admin: AdminClient) -> None:
    admin.alter_client_quotas([ClientQuotaAlteration(ALICE, {"producer_byte_rate": 1})],
                              validate_only=True)
    assert admin.describe_client_quotas() == {}
    with pytest.raises(E.InvalidRequestError, match="Invalid configuration key"):
        admin.alter_client_quotas([ClientQuotaAlteration(ALICE, {"no_such_quota": 1})])
    with pytest.raises(E.InvalidRequestError, match="integer"):
        admin.alter_client_quotas([ClientQuotaAlteration(ALICE, {"producer_byte_rate": 1.5})])
    with pytest.raises(E.InvalidRequestError):  # an ip quota key on a user entity
        admin.alter_client_quotas([ClientQuotaAlteration(
            ALICE, {"connection_creation_rate": 1})])
    with pytest.raises(E.InvalidRequestError):
        admin.alter_client_quotas([ClientQuotaAlteration(
            ClientQuotaEntity({"ip": "not-an-ip"}), {"connection_creation_rate": 1})])
    with pytest.raises(PartialFailureError) as partial:  # the valid entity is still applied
        admin.alter_client_quotas([
            ClientQuotaAlteration(ClientQuotaEntity({"ip": "::1", "user": "x"}),
                                  {"connection_creation_rate": 1}),
            ClientQuotaAlteration(ALICE, {"consumer_byte_rate": 7})])
    assert isinstance(partial.value.results[ClientQuotaEntity({"ip": "::1", "user": "x"})],
                      E.InvalidRequestError)
    assert admin.describe_client_quotas() == {ALICE: {"consumer_byte_rate": 7.0}}
    with pytest.raises(E.InvalidRequestError):
        admin.describe_client_quotas(ClientQuotaFilter.contains(
            [C.of_entity_type("user"), C.of_entity_type("ip")]))


def test_unknown_entity_type_in_a_filter_is_refused(cluster: Cluster) -> None:
    req = DescribeClientQuotasRequest
    resp = send_request(cluster.bootstrap_servers.split(",")[0], req(components=[
        req.ComponentData(entity_type="group", match_type=2, match=None)], strict=False), 1)
    assert resp.error_code == E.InvalidRequestError.code and resp.entries is None


def test_quotas_need_cluster_configs_acls_with_an_authorizer() -> None:
    users = {"admin": "a", "alice": "b"}
    auth = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN")
    with Cluster(sasl_users=users, authorizer=True, super_users=["User:admin"]) as c:
        bs = c.bootstrap_servers
        with AdminClient(bootstrap_servers=bs, sasl_username="alice", sasl_password="b",
                         **auth) as alice:
            with pytest.raises(E.ClusterAuthorizationFailedError):
                alice.describe_client_quotas()
            with pytest.raises(E.ClusterAuthorizationFailedError):
                alice.alter_client_quotas([ClientQuotaAlteration(ALICE, {"producer_byte_rate": 1})])
            with AdminClient(bootstrap_servers=bs, sasl_username="admin", sasl_password="a",
                             **auth) as root:
                root.create_acls([AclBinding(
                    ResourceType.CLUSTER, "kafka-cluster", ResourcePatternType.LITERAL,
                    "User:alice", "*", AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW)])
            alice.alter_client_quotas([ClientQuotaAlteration(ALICE, {"producer_byte_rate": 1})])
            # ALTER_CONFIGS implies DESCRIBE_CONFIGS
            assert alice.describe_client_quotas() == {ALICE: {"producer_byte_rate": 1.0}}
        assert c.internal_errors() == []
