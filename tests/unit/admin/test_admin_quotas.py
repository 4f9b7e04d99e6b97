"""Client quotas (KIP-546) against crafted responses.

No test broker implements DescribeClientQuotas / AlterClientQuotas (TEST-BROKERS.md: Tansu
does not serve them, the mock cluster has no admin APIs), so the admin client runs against
the crafted peer of ``_crafted.py`` with a quota store written here from Kafka's rules
(exact / default / any-name matching, strict filters, removal, validate-only, an unknown key
refused per entity). The codecs are checked byte for byte against kafka-python in
tests/unit/test_messages_admin_apis.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kontrakt.clients.admin import (
    AdminClient,
    AsyncAdminClient,
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
)
from kontrakt.errors import InvalidArgumentError, PartialFailureError
from kontrakt.protocol.errors import InvalidRequestError
from kontrakt.protocol.messages import AlterClientQuotasResponse, DescribeClientQuotasResponse
from tests._crafted_broker import CraftedBroker

FAST = {"retry.backoff.ms": 10, "retry.backoff.max.ms": 50, "request.timeout.ms": 3000}
INVALID_REQUEST = 42
KEYS = {"producer_byte_rate", "consumer_byte_rate", "request_percentage"}

Entity = tuple[tuple[str, str | None], ...]


class QuotaStore:
    """The broker's side: entity -> quota key -> value."""

    def __init__(self) -> None:
        self.quotas: dict[Entity, dict[str, float]] = {}

    def handlers(self) -> dict[int, Any]:
        return {48: self.describe, 49: self.alter}

    def describe(self, ver: int, req: Any) -> Any:
        r = DescribeClientQuotasResponse
        out = []
        for entity, values in self.quotas.items():
            names = dict(entity)
            if req.strict and set(names) != {c.entity_type for c in req.components}:
                continue
            if all(c.entity_type in names and (
                    (c.match_type == 0 and names[c.entity_type] == c.match)
                    or (c.match_type == 1 and names[c.entity_type] is None)
                    or c.match_type == 2) for c in req.components):
                out.append(r.EntryData(
                    entity=[r.EntryData.EntityData(entity_type=t, entity_name=n)
                            for t, n in entity],
                    values=[r.EntryData.ValueData(key=k, value=v) for k, v in values.items()]))
        return r(entries=out)

    def alter(self, ver: int, req: Any) -> Any:
        r = AlterClientQuotasResponse
        out = []
        for e in req.entries:
            entity = tuple(sorted((x.entity_type, x.entity_name) for x in e.entity))
            bad = [op.key for op in e.ops if op.key not in KEYS]
            if not bad and not req.validate_only:
                values = self.quotas.setdefault(entity, {})
                for op in e.ops:
                    if op.remove:
                        values.pop(op.key, None)
                    else:
                        values[op.key] = op.value
                if not values:
                    del self.quotas[entity]
            out.append(r.EntryData(
                error_code=INVALID_REQUEST if bad else 0,
                error_message=f"Unrecognized quota key {bad[0]}" if bad else None,
                entity=[r.EntryData.EntityData(entity_type=t, entity_name=n)
                        for t, n in entity]))
        return r(entries=out)


ALICE = ClientQuotaEntity({"user": "alice"})
ALICE_APP = ClientQuotaEntity({"user": "alice", "client-id": "app"})
DEFAULT_USER = ClientQuotaEntity({"user": None})


def test_alter_then_describe_with_filters() -> None:
    store = QuotaStore()
    component = ClientQuotaFilterComponent

    async def main() -> dict[str, Any]:
        async with CraftedBroker(store.handlers()) as broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            done = await admin.alter_client_quotas([
                ClientQuotaAlteration(ALICE, {"producer_byte_rate": 1024,
                                              "consumer_byte_rate": 2048.5}),
                ClientQuotaAlteration(ALICE_APP, {"request_percentage": 50}),
                ClientQuotaAlteration(DEFAULT_USER, {"producer_byte_rate": 512}),
            ])
            checked = await admin.alter_client_quotas(
                [ClientQuotaAlteration(ALICE, {"producer_byte_rate": 1})], validate_only=True)
            out = {"done": done, "checked": checked,
                   "all": await admin.describe_client_quotas(),
                   "alice_any": await admin.describe_client_quotas(ClientQuotaFilter.contains(
                       [component.of_entity("user", "alice")])),
                   "alice_only": await admin.describe_client_quotas(
                       ClientQuotaFilter.contains_only([component.of_entity("user", "alice")])),
                   "default": await admin.describe_client_quotas(ClientQuotaFilter.contains(
                       [component.of_default_entity("user")])),
                   "any_client": await admin.describe_client_quotas(ClientQuotaFilter.contains(
                       [component.of_entity_type("client-id")]))}
            await admin.alter_client_quotas([ClientQuotaAlteration(
                ALICE, {"producer_byte_rate": None})])
            out["removed"] = await admin.describe_client_quotas(
                ClientQuotaFilter.contains_only([component.of_entity("user", "alice")]))
            out["requests"] = [req for _, _, req in broker.seen]
            return out

    r = asyncio.run(main())
    assert r["done"] == {ALICE: None, ALICE_APP: None, DEFAULT_USER: None}
    assert r["checked"] == {ALICE: None}
    assert r["all"] == {ALICE: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.5},
                        ALICE_APP: {"request_percentage": 50.0},
                        DEFAULT_USER: {"producer_byte_rate": 512.0}}
    assert set(r["alice_any"]) == {ALICE, ALICE_APP}
    assert set(r["alice_only"]) == {ALICE}
    assert set(r["default"]) == {DEFAULT_USER}
    assert set(r["any_client"]) == {ALICE_APP}
    assert r["removed"] == {ALICE: {"consumer_byte_rate": 2048.5}}
    # validate_only reached the broker (which then changed nothing)
    assert r["requests"][1].validate_only is True
    remove = r["requests"][-2].entries[0].ops[0]
    assert (remove.key, remove.remove) == ("producer_byte_rate", True)


def test_an_unknown_key_fails_only_its_entity() -> None:
    store = QuotaStore()

    async def main() -> tuple[Any, Any]:
        async with CraftedBroker(store.handlers()) as broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            with pytest.raises(PartialFailureError) as info:
                await admin.alter_client_quotas([
                    ClientQuotaAlteration(ALICE, {"producer_byte_rate": 10}),
                    ClientQuotaAlteration(DEFAULT_USER, {"bogus_rate": 1}),
                ])
            with pytest.raises(InvalidRequestError, match="Unrecognized quota key bogus"):
                await admin.alter_client_quotas([
                    ClientQuotaAlteration(DEFAULT_USER, {"bogus_rate": 1})])
            return info.value, await admin.describe_client_quotas()

    err, left = asyncio.run(main())
    assert err.results[ALICE] is None
    assert isinstance(err.results[DEFAULT_USER], InvalidRequestError)
    assert left == {ALICE: {"producer_byte_rate": 10.0}}


@pytest.mark.parametrize(("call", "match"), [
    (lambda a: a.alter_client_quotas([ClientQuotaAlteration(ALICE, {"x": -1})]), "> 0"),
    (lambda a: a.alter_client_quotas([ClientQuotaAlteration(ALICE, {"x": float("nan")})]),
     "finite"),
    (lambda a: a.alter_client_quotas([ClientQuotaAlteration(ALICE, {"": 1})]), "keys"),
    (lambda a: a.alter_client_quotas([ClientQuotaAlteration(ALICE, {"x": 1}),
                                      ClientQuotaAlteration(ALICE, {"y": 1})]), "twice"),
    (lambda a: a.alter_client_quotas([(ALICE, {"x": 1})]), "ClientQuotaAlteration"),
    (lambda a: a.describe_client_quotas(ClientQuotaFilter.contains(
        [ClientQuotaFilterComponent.of_entity_type("user"),
         ClientQuotaFilterComponent.of_default_entity("user")])), "twice"),
    (lambda a: a.describe_client_quotas({"user": "alice"}), "ClientQuotaFilter"),
])
def test_bad_input_is_refused_before_sending(call: Any, match: str) -> None:
    async def main() -> None:
        async with CraftedBroker(QuotaStore().handlers()) as broker, AsyncAdminClient(
                {"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            with pytest.raises(InvalidArgumentError, match=match):
                await call(admin)
            assert broker.seen == []

    asyncio.run(main())
    with pytest.raises(InvalidArgumentError):
        ClientQuotaEntity({})


def test_entities_are_hashable_mappings() -> None:
    assert ClientQuotaEntity({"client-id": "app", "user": "alice"}) == ALICE_APP
    assert hash(ClientQuotaEntity({"client-id": "app", "user": "alice"})) == hash(ALICE_APP)
    assert dict(ALICE_APP) == {"user": "alice", "client-id": "app"}
    assert DEFAULT_USER["user"] is None


def test_sync_client_runs_the_same_calls() -> None:
    store = QuotaStore()

    async def main() -> Any:
        async with CraftedBroker(store.handlers()) as broker:
            def blocking() -> Any:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    admin.alter_client_quotas([ClientQuotaAlteration(
                        ALICE, {"consumer_byte_rate": 4096})])
                    return admin.describe_client_quotas()
            return await asyncio.to_thread(blocking)

    assert asyncio.run(main()) == {ALICE: {"consumer_byte_rate": 4096.0}}
