"""fence_producers (and force_terminate_transaction, built on it) against a crafted
transaction coordinator: the InitProducerId each id gets (no producer id or epoch, the
call's timeout as transaction timeout), a retriable
error that Java's fenceProducers treats as final, and bad input.

The routing to each id's coordinator and the coordinator retries are checked on
librdkafka's mock cluster and the epoch bump on Tansu
(tests/integration/test_admin_fence_producers.py); neither lets a test see the request's
fields, hence this crafted peer (``tests/_crafted_broker.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kontrakt.clients.admin import AdminClient, ProducerIdAndEpoch
from kontrakt.errors import InvalidArgumentError, PartialFailureError
from kontrakt.protocol.errors import InvalidProducerEpochError
from kontrakt.protocol.messages import InitProducerIdResponse
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import FAST, run

INIT_PRODUCER_ID = 22
INVALID_PRODUCER_EPOCH = 47


class Coordinator:
    """Answers InitProducerId as a coordinator that bumps each id's epoch (producer id 100
    + the id's position in ``ids``), or with ``errors[id]``."""

    def __init__(self, ids: list[str], errors: dict[str, int] | None = None) -> None:
        self.ids = ids
        self.errors = errors or {}
        self.epochs: dict[str, int] = {}
        self.asked: list[tuple[int, Any]] = []

    def __call__(self, ver: int, req: Any) -> Any:
        self.asked.append((ver, req))
        tid = req.transactional_id
        if tid in self.errors:
            return InitProducerIdResponse(error_code=self.errors[tid])
        self.epochs[tid] = self.epochs.get(tid, -1) + 1
        return InitProducerIdResponse(producer_id=100 + self.ids.index(tid),
                                      producer_epoch=self.epochs[tid])


def _fields(req: Any) -> tuple[Any, ...]:
    return (req.transactional_id, req.transaction_timeout_ms, req.producer_id,
            req.producer_epoch)


def test_each_id_gets_an_init_producer_id_without_producer_id_or_epoch() -> None:
    coordinator = Coordinator(["a", "b"])
    out = run(CraftedBroker({INIT_PRODUCER_ID: coordinator}),
              lambda a: a.fence_producers(["a", "b"], timeout=7))
    assert out == {"a": ProducerIdAndEpoch(100, 0), "b": ProducerIdAndEpoch(101, 0)}
    assert all(v >= 3 for v, _r in coordinator.asked)  # versions carrying id and epoch
    # the call's timeout is the transaction timeout the coordinator appends with (Java's)
    assert sorted(_fields(r) for _v, r in coordinator.asked) == [
        ("a", 7000, -1, -1), ("b", 7000, -1, -1)]


def test_without_a_timeout_the_transaction_timeout_is_request_timeout_ms() -> None:
    coordinator = Coordinator(["a"])
    run(CraftedBroker({INIT_PRODUCER_ID: coordinator}), lambda a: a.fence_producers(["a"]))
    assert [_fields(r) for _v, r in coordinator.asked] == [
        ("a", FAST["request.timeout.ms"], -1, -1)]


def test_each_fence_bumps_the_epoch_again() -> None:
    coordinator = Coordinator(["a"])

    async def twice(a: Any) -> Any:
        return [(await a.fence_producers(["a"]))["a"] for _ in range(2)]

    assert run(CraftedBroker({INIT_PRODUCER_ID: coordinator}), twice) == [
        ProducerIdAndEpoch(100, 0), ProducerIdAndEpoch(100, 1)]


def test_an_error_java_treats_as_final_is_not_retried_and_fails_only_its_id() -> None:
    # Kontrakt marks INVALID_PRODUCER_EPOCH retriable (a producer may retry it); fencing
    # cannot cure it by asking again.
    coordinator = Coordinator(["a", "b"], errors={"b": INVALID_PRODUCER_EPOCH})
    out = run(CraftedBroker({INIT_PRODUCER_ID: coordinator}),
              lambda a: a.fence_producers(["a", "b"], timeout=10, return_exceptions=True))
    assert out["a"] == ProducerIdAndEpoch(100, 0)
    assert isinstance(out["b"], InvalidProducerEpochError)
    assert [r.transactional_id for _v, r in coordinator.asked].count("b") == 1

    with pytest.raises(PartialFailureError) as info:
        run(CraftedBroker({INIT_PRODUCER_ID: Coordinator(
            ["a", "b"], errors={"b": INVALID_PRODUCER_EPOCH})}),
            lambda a: a.fence_producers(["a", "b"], timeout=10))
    assert set(info.value.errors) == {"b"}


@pytest.mark.parametrize("ids", [[""], ["a", "a"], [None], [b"a"]])
def test_bad_ids_are_refused_before_anything_is_sent(ids: list[Any]) -> None:
    coordinator = Coordinator(["a"])
    with pytest.raises(InvalidArgumentError):
        run(CraftedBroker({INIT_PRODUCER_ID: coordinator}),
            lambda a: a.fence_producers(ids))
    assert coordinator.asked == []


def test_the_blocking_client_fences_too() -> None:
    coordinator = Coordinator(["a"])

    async def main() -> Any:
        async with CraftedBroker({INIT_PRODUCER_ID: coordinator}) as broker:
            def blocking() -> Any:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    return admin.fence_producers(["a"], timeout=10)
            return await asyncio.to_thread(blocking)

    assert asyncio.run(main()) == {"a": ProducerIdAndEpoch(100, 0)}


def test_force_terminate_transaction_fences_its_one_id() -> None:
    coordinator = Coordinator(["a"])
    assert run(CraftedBroker({INIT_PRODUCER_ID: coordinator}),
               lambda a: a.force_terminate_transaction("a", timeout=6)) is None
    assert [_fields(r) for _v, r in coordinator.asked] == [("a", 6000, -1, -1)]
    with pytest.raises(InvalidProducerEpochError):
        run(CraftedBroker({INIT_PRODUCER_ID: Coordinator(
            ["a"], errors={"a": INVALID_PRODUCER_EPOCH})}),
            lambda a: a.force_terminate_transaction("a", timeout=10))
    with pytest.raises(InvalidArgumentError):
        run(CraftedBroker({INIT_PRODUCER_ID: coordinator}),
            lambda a: a.force_terminate_transaction(""))
