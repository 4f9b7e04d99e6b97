"""Delegation tokens (KIP-48 / KIP-373) against crafted responses.

No test broker implements Create/Renew/Expire/DescribeDelegationToken (TEST-BROKERS.md:
Tansu does not serve them, the mock cluster has no admin APIs), so the admin client runs
against the crafted peer of ``_crafted.py`` with a small token store written here from
Kafka's rules (tokens keyed by HMAC; renew up to the maximum lifetime; expire with a
negative period ends the token now; describe filters by owner). The codecs are checked by
round trips in tests/unit/test_messages_admin_apis.py.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from kontrakt.clients.admin import (
    AdminClient,
    AsyncAdminClient,
    DelegationToken,
    KafkaPrincipal,
)
from kontrakt.errors import InvalidArgumentError, UnsupportedVersionError
from kontrakt.protocol.errors import (
    DelegationTokenNotFoundError,
    DelegationTokenRequestNotAllowedError,
)
from kontrakt.protocol.messages import (
    CreateDelegationTokenResponse,
)
from tests._crafted_broker import CraftedBroker
from tests.unit.admin._token_store import EXPIRY, NOW, TokenStore

FAST = {"retry.backoff.ms": 10, "retry.backoff.max.ms": 50, "request.timeout.ms": 3000}
REQUEST_NOT_ALLOWED = 64


def test_token_lifecycle_create_describe_renew_expire() -> None:
    store = TokenStore()
    bob = KafkaPrincipal("User", "bob")

    async def main() -> dict[str, Any]:
        async with CraftedBroker(store.handlers()) as broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            mine = await admin.create_delegation_token(renewers=[bob],
                                                       max_lifetime_ms=3 * EXPIRY)
            theirs = await admin.create_delegation_token(
                owner=KafkaPrincipal.from_string("User:carol"))
            every = await admin.describe_delegation_token()
            carols = await admin.describe_delegation_token([KafkaPrincipal("User", "carol")])
            renewed = await admin.renew_delegation_token(mine.hmac,
                                                         renew_time_period_ms=2 * EXPIRY)
            capped = await admin.renew_delegation_token(mine.hmac,
                                                        renew_time_period_ms=10 * EXPIRY)
            ended = await admin.expire_delegation_token(theirs.hmac)
            with pytest.raises(DelegationTokenNotFoundError, match="renew_delegation_token"):
                await admin.renew_delegation_token(theirs.hmac)
            left = await admin.describe_delegation_token()
            versions = {key: ver for key, ver, _ in broker.seen}
            return {"mine": mine, "theirs": theirs, "every": every, "carols": carols,
                    "renewed": renewed, "capped": capped, "ended": ended, "left": left,
                    "versions": versions}

    r = asyncio.run(main())
    mine: DelegationToken = r["mine"]
    info = mine.token_info
    assert info.owner == KafkaPrincipal("User", "admin")
    assert info.token_requester == KafkaPrincipal("User", "admin")
    assert info.renewers == [bob]
    assert (info.issue_timestamp_ms, info.expiry_timestamp_ms, info.max_timestamp_ms) == (
        NOW, NOW + EXPIRY, NOW + 3 * EXPIRY)
    assert store.tokens[mine.hmac]["id"] == info.token_id
    # The SCRAM password of a token login is the base64 of its HMAC; the repr hides it.
    assert base64.b64decode(mine.scram_password) == mine.hmac
    assert mine.scram_password not in repr(mine) and "hmac" not in repr(mine)
    assert r["theirs"].token_info.owner == KafkaPrincipal("User", "carol")
    assert sorted(t.token_info.token_id for t in r["every"]) == sorted(
        [info.token_id, r["theirs"].token_info.token_id])
    described = {t.token_info.token_id: t for t in r["every"]}[info.token_id]
    assert described == mine
    assert [t.token_info.owner.name for t in r["carols"]] == ["carol"]
    assert r["renewed"] == NOW + 2 * EXPIRY
    assert r["capped"] == NOW + 3 * EXPIRY  # never past the maximum lifetime
    assert r["ended"] == NOW
    assert [t.token_info.token_id for t in r["left"]] == [info.token_id]
    assert r["versions"] == {38: 3, 39: 2, 40: 2, 41: 3}


def test_owner_needs_v3_and_older_brokers_still_create() -> None:
    store = TokenStore()

    async def main() -> tuple[Any, Any]:
        async with CraftedBroker(store.handlers(), max_versions={38: 2, 41: 2}) as broker, \
                AsyncAdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            with pytest.raises(UnsupportedVersionError, match="KIP-373"):
                await admin.create_delegation_token(owner=KafkaPrincipal("User", "carol"))
            assert broker.seen == []  # refused before sending
            token = await admin.create_delegation_token()
            return token, await admin.describe_delegation_token()

    token, described = asyncio.run(main())
    assert token.token_info.token_requester is None
    assert described[0].token_info.token_requester is None


def test_broker_refusals_are_typed() -> None:
    def refuse(ver: int, req: Any) -> Any:
        return CreateDelegationTokenResponse(error_code=REQUEST_NOT_ALLOWED)

    async def main() -> None:
        async with CraftedBroker({38: refuse}) as broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            with pytest.raises(DelegationTokenRequestNotAllowedError):
                await admin.create_delegation_token()
            assert len(broker.seen) == 1  # not retried

    asyncio.run(main())


def test_bad_input_is_refused_before_sending() -> None:
    store = TokenStore()

    async def main() -> None:
        async with CraftedBroker(store.handlers()) as broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            with pytest.raises(InvalidArgumentError, match="renewers"):
                await admin.create_delegation_token(renewers=["User:bob"])  # type: ignore[list-item]
            with pytest.raises(InvalidArgumentError, match="max_lifetime_ms"):
                await admin.create_delegation_token(max_lifetime_ms=-5)
            with pytest.raises(InvalidArgumentError, match="hmac"):
                await admin.renew_delegation_token(b"")
            with pytest.raises(InvalidArgumentError, match="owners"):
                await admin.describe_delegation_token([("User", "x")])  # type: ignore[list-item]
            assert broker.seen == []

    asyncio.run(main())
    with pytest.raises(InvalidArgumentError, match="Type:name"):
        KafkaPrincipal.from_string("alice")


def test_sync_client_runs_the_same_calls() -> None:
    store = TokenStore()

    async def main() -> None:
        async with CraftedBroker(store.handlers()) as broker:
            def blocking() -> None:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    token = admin.create_delegation_token(max_lifetime_ms=EXPIRY)
                    assert admin.renew_delegation_token(token.hmac) == NOW + EXPIRY
                    assert admin.describe_delegation_token() == [token]
                    assert admin.expire_delegation_token(token.hmac) == NOW
                    assert admin.describe_delegation_token() == []
            await asyncio.to_thread(blocking)

    asyncio.run(main())
