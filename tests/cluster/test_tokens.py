"""Delegation tokens on the in-process cluster: create / renew / expire / describe through
Kontrakt's admin client with Kafka's semantics (owner, requester, renewers, expiry bounded by
the max lifetime, refusal over PLAINTEXT and token logins, disabled without a secret), and a
SCRAM login with a token (``sasl.scram.tokenauth``) acting as the token's owner. Neither test
broker serves delegation tokens, so the expected results are Kafka's documented semantics
(KIP-48, KIP-373)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kontrakt import Producer
from kontrakt.clients.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    KafkaPrincipal,
    ResourcePatternType,
    ResourceType,
)
from kontrakt.errors import AuthenticationError
from kontrakt.protocol import errors as E
from kontrakt.testing import Cluster

USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
HOUR, DAY = 3_600_000, 86_400_000


def _auth(user: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_username=user, sasl_password=USERS[user])


@pytest.fixture
def secured() -> Iterator[Cluster]:
    with Cluster(sasl_users=USERS, delegation_token_secret_key="s3cret",
                 delegation_token_expiry_time_ms=HOUR,
                 delegation_token_max_lifetime_ms=DAY) as c:
        yield c
        assert c.internal_errors() == []


def _admin(cluster: Cluster, user: str) -> AdminClient:
    return AdminClient(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=20,
                       **_auth(user))


def test_create_renew_expire_describe(secured: Cluster) -> None:
    bob = KafkaPrincipal("User", "bob")
    with _admin(secured, "alice") as alice:
        token = alice.create_delegation_token(renewers=[bob], max_lifetime_ms=2 * HOUR)
        info = token.token_info
        assert info.owner == KafkaPrincipal("User", "alice") == info.token_requester
        assert info.renewers == [bob]
        assert info.max_timestamp_ms - info.issue_timestamp_ms == 2 * HOUR
        assert info.expiry_timestamp_ms - info.issue_timestamp_ms == HOUR
        capped = alice.create_delegation_token(max_lifetime_ms=10 * DAY).token_info
        assert capped.max_timestamp_ms - capped.issue_timestamp_ms == DAY  # broker max
        described = alice.describe_delegation_token()
        assert {t.token_info.token_id for t in described} == {info.token_id,
                                                              capped.token_id}
        assert next(t for t in described if t.token_info.token_id == info.token_id).hmac \
            == token.hmac
        assert alice.describe_delegation_token([bob]) == []
        with pytest.raises(E.DelegationTokenNotFoundError):
            alice.renew_delegation_token(b"not-a-token-hmac")
    with _admin(secured, "bob") as b:  # a renewer
        expiry = b.renew_delegation_token(token.hmac, renew_time_period_ms=10 * HOUR)
        assert expiry == info.max_timestamp_ms  # never past the max timestamp
    with _admin(secured, "carol") as carol:  # neither owner nor renewer
        with pytest.raises(E.DelegationTokenOwnerMismatchError):
            carol.renew_delegation_token(token.hmac)
        with pytest.raises(E.DelegationTokenOwnerMismatchError):
            carol.expire_delegation_token(token.hmac)
    with _admin(secured, "alice") as alice:
        alice.expire_delegation_token(token.hmac)  # -1: at once, the token is gone
        assert [t.token_info.token_id for t in alice.describe_delegation_token()] == [
            capped.token_id]
        with pytest.raises(E.DelegationTokenNotFoundError):
            alice.renew_delegation_token(token.hmac)


def test_scram_login_with_a_token_acts_as_its_owner(secured: Cluster) -> None:
    secured.create_topic("t", partitions=1)
    with _admin(secured, "alice") as alice:
        token = alice.create_delegation_token()
    login = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                 sasl_username=token.token_info.token_id,
                 sasl_password=token.scram_password, sasl_scram_tokenauth=True)
    bs = secured.bootstrap_servers
    with Producer(bootstrap_servers=bs, **login) as p:
        assert p.send_and_wait("t", b"by-token", partition=0).offset == 0
    # Kafka refuses token requests over a connection that logged in with a token
    with AdminClient(bootstrap_servers=bs, retry_backoff_ms=20, **login) as by_token, \
            pytest.raises(E.DelegationTokenRequestNotAllowedError):
        by_token.create_delegation_token()
    wrong = dict(login, sasl_password="d3Jvbmc=")
    with pytest.raises(AuthenticationError), Producer(
            bootstrap_servers=bs, max_block_ms=3000, **wrong) as p:
        p.send_and_wait("t", b"x", partition=0)
    with _admin(secured, "alice") as alice:
        alice.expire_delegation_token(token.hmac)
    with pytest.raises(AuthenticationError), Producer(
            bootstrap_servers=bs, max_block_ms=3000, **login) as p:
        p.send_and_wait("t", b"x", partition=0)


def test_token_login_principal_is_checked_by_acls() -> None:
    """With an authorizer, a token login is the owner: its ACLs apply."""
    with Cluster(sasl_users=USERS, delegation_token_secret_key="k", authorizer=True,
                 super_users=["User:carol"]) as c:
        c.create_topic("t", partitions=1)
        with _admin(c, "carol") as carol:
            carol.create_acls([AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL,
                                          "User:alice", "*", AclOperation.WRITE,
                                          AclPermissionType.ALLOW)])
            # carol (a super user) may create a token owned by alice (CREATE_TOKENS)
            token = carol.create_delegation_token(owner=KafkaPrincipal("User", "alice"))
        assert token.token_info.token_requester == KafkaPrincipal("User", "carol")
        with _admin(c, "bob") as bob, pytest.raises(
                E.DelegationTokenAuthorizationFailedError):
            bob.create_delegation_token(owner=KafkaPrincipal("User", "alice"))
        with Producer(bootstrap_servers=c.bootstrap_servers, sasl_scram_tokenauth=True,
                      security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                      sasl_username=token.token_info.token_id,
                      sasl_password=token.scram_password) as p:
            assert p.send_and_wait("t", b"as-alice", partition=0).offset == 0
        assert c.internal_errors() == []


def test_tokens_refused_over_plaintext_and_without_a_secret() -> None:
    with Cluster() as plain, AdminClient(bootstrap_servers=plain.bootstrap_servers,
                                         retry_backoff_ms=20) as a, pytest.raises(
            E.DelegationTokenRequestNotAllowedError):
        a.create_delegation_token()
    with Cluster(sasl_users=USERS) as c, _admin(c, "alice") as a, pytest.raises(
            E.DelegationTokenAuthDisabledError):
        a.create_delegation_token()
