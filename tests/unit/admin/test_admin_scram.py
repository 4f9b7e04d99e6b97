"""SCRAM credential administration (KIP-554) against crafted responses.

No test broker implements DescribeUserScramCredentials / AlterUserScramCredentials
(TEST-BROKERS.md: Tansu cannot store SCRAM users, the mock cluster has no admin APIs), so
the admin client's requests and its handling of answers are checked against the crafted
peer of ``tests/_crafted_broker.py``; the codecs are checked byte for byte against kafka-python in
tests/unit/test_messages_admin_apis.py. The salted credential the client sends is checked
with ``scramp`` (an independent SCRAM implementation): it derives the same keys from the
password, and a SCRAM server holding the credential accepts a login with the password.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
from typing import Any

import pytest
import scramp

from kontrakt.clients._net.security import ScramClient
from kontrakt.clients.admin import (
    AdminClient,
    AsyncAdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from kontrakt.errors import InvalidArgumentError, PartialFailureError
from kontrakt.protocol.errors import ResourceNotFoundError, UnacceptableCredentialError
from kontrakt.protocol.messages import (
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponse,
)
from tests._crafted_broker import CraftedBroker

FAST = {"retry.backoff.ms": 10, "retry.backoff.max.ms": 50, "request.timeout.ms": 3000}
RESOURCE_NOT_FOUND = 91
UNACCEPTABLE_CREDENTIAL = 93


def _alter_ok(ver: int, req: Any) -> Any:
    r = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    users = dict.fromkeys([*(d.name for d in req.deletions), *(u.name for u in req.upsertions)])
    return AlterUserScramCredentialsResponse(results=[
        r(user=u, error_code=RESOURCE_NOT_FOUND if u == "carol" else 0,
          error_message="no credential for carol" if u == "carol" else None) for u in users])


def _login(mechanism: str, upsertion: Any, password: str, *, right: bool = True) -> None:
    """Log in as the upserted user with ``password`` against a scramp server that holds
    only what the broker would store (salt, iterations and keys from SaltedPassword)."""
    hash_name = "sha256" if mechanism.endswith("256") else "sha512"
    salted = upsertion.salted_password
    stored_key = hashlib.new(hash_name, hmac.new(salted, b"Client Key", hash_name).digest()
                             ).digest()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    # scramp derives the same keys from the password itself.
    _, s_stored, s_server, _ = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=upsertion.iterations, salt=upsertion.salt)
    assert ((stored_key, server_key) == (s_stored, s_server)) is right
    server = scramp.ScramMechanism(mechanism).make_server(
        lambda _user: (upsertion.salt, stored_key, server_key, upsertion.iterations))
    client = ScramClient(mechanism, upsertion.name, password)
    server.set_client_first(client.first_message().decode())
    final = client.final_message(server.get_server_first().encode())
    server.set_client_final(final.decode())
    client.verify(server.get_server_final().encode())


def test_alter_salts_as_kafka_expects_and_the_credential_logs_in() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")  # RFC 7677's example salt

    async def main() -> tuple[Any, Any]:
        async with CraftedBroker({51: _alter_ok}) as broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            with pytest.raises(PartialFailureError) as info:
                await admin.alter_user_scram_credentials([
                    UserScramCredentialUpsertion(
                        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                        b"pencil", salt),
                    UserScramCredentialUpsertion(
                        "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                        "pässword"),
                    UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256),
                ])
            ((_key, _ver, req),) = broker.seen
            return info.value, req

    err, req = asyncio.run(main())
    assert err.results["alice"] is None and err.results["bob"] is None
    assert isinstance(err.results["carol"], ResourceNotFoundError)
    assert [(d.name, d.mechanism) for d in req.deletions] == [("carol", 1)]
    alice, bob = req.upsertions
    assert (alice.name, alice.mechanism, alice.iterations, alice.salt) == (
        "alice", 1, 8192, salt)
    # A random salt as Kafka's admin client makes it: 130 random bits in base 36.
    assert (bob.name, bob.mechanism, bob.iterations) == ("bob", 2, 4096)
    assert 20 <= len(bob.salt) <= 26 and bob.salt.decode().isalnum()
    assert b"pencil" not in bytes(alice.salted_password)
    _login("SCRAM-SHA-256", alice, "pencil")
    _login("SCRAM-SHA-512", bob, "pässword")
    with pytest.raises(scramp.ScramException):
        _login("SCRAM-SHA-512", bob, "wrong", right=False)


def test_describe_users_and_every_user() -> None:
    r = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
    info = r.CredentialInfo

    def describe(ver: int, req: Any) -> Any:
        asked = ["alice", "bob", "dave"] if req.users is None else [u.name for u in req.users]
        results = []
        for u in asked:
            if u == "dave":
                results.append(r(user=u, error_code=RESOURCE_NOT_FOUND,
                                 error_message="Attempt to describe a user credential that "
                                               "does not exist"))
            else:
                results.append(r(user=u, credential_infos=[
                    info(mechanism=1, iterations=8192)] + (
                    [info(mechanism=2, iterations=4096)] if u == "bob" else [])))
        return DescribeUserScramCredentialsResponse(results=results)

    async def main() -> tuple[Any, Any, Any, list[Any]]:
        async with CraftedBroker({50: describe}) as broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            some = await admin.describe_user_scram_credentials(["alice", "bob"])
            every = await admin.describe_user_scram_credentials(return_exceptions=True)
            with pytest.raises(ResourceNotFoundError, match="user 'dave'"):
                await admin.describe_user_scram_credentials(["dave"])
            return some, every, None, [req for _, _, req in broker.seen]

    some, every, _, reqs = asyncio.run(main())
    assert [[u.name for u in req.users] if req.users is not None else None
            for req in reqs] == [["alice", "bob"], None, ["dave"]]
    assert some == {
        "alice": UserScramCredentialsDescription(
            "alice", [ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)]),
        "bob": UserScramCredentialsDescription(
            "bob", [ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                    ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)])}
    assert set(every) == {"alice", "bob", "dave"}
    assert isinstance(every["dave"], ResourceNotFoundError)


def test_bad_alterations_are_refused_before_sending() -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    bad: list[tuple[list[Any], str]] = [
        ([UserScramCredentialUpsertion("a", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_256, 1000), "pw")], "4096..16384"),
        ([UserScramCredentialUpsertion("a", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_512, 20000), "pw")], "4096..16384"),
        ([UserScramCredentialUpsertion("a", info, "")], "non-empty password"),
        ([UserScramCredentialUpsertion("", info, "pw")], "non-empty string"),
        ([UserScramCredentialDeletion("a", ScramMechanism.UNKNOWN)], "SCRAM_SHA_256 or"),
        ([UserScramCredentialUpsertion("a", info, "pw"),
          UserScramCredentialDeletion("a", ScramMechanism.SCRAM_SHA_256)], "twice"),
        (["alice"], "expected UserScramCredentialUpsertion"),
    ]

    async def main() -> list[Any]:
        async with CraftedBroker({51: _alter_ok}) as broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            for alterations, message in bad:
                with pytest.raises(InvalidArgumentError, match=message):
                    await admin.alter_user_scram_credentials(alterations)
            with pytest.raises(InvalidArgumentError):
                await admin.describe_user_scram_credentials(["a", "a"])
            return broker.seen

    assert asyncio.run(main()) == []
    assert "pw" not in repr(UserScramCredentialUpsertion("a", info, "pw", b"salt"))


def test_blocking_admin_client() -> None:
    def alter(ver: int, req: Any) -> Any:
        r = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
        return AlterUserScramCredentialsResponse(results=[r(
            user=u.name, error_code=UNACCEPTABLE_CREDENTIAL,
            error_message="Too few iterations") for u in req.upsertions])

    def describe(ver: int, req: Any) -> Any:
        r = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
        return DescribeUserScramCredentialsResponse(results=[r(user="alice", credential_infos=[
            r.CredentialInfo(mechanism=2, iterations=4096)])])

    async def main() -> Any:
        async with CraftedBroker({50: describe, 51: alter}) as broker:
            def blocking() -> Any:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    with pytest.raises(UnacceptableCredentialError, match="Too few"):
                        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                            "pw")])
                    return admin.describe_user_scram_credentials(["alice"])
            return await asyncio.to_thread(blocking)

    assert asyncio.run(main())["alice"].scram_credential_infos == [
        ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)]
