"""unregister_broker against a crafted broker.

Neither test broker answers UnregisterBroker (API 64): Tansu 0.6.0 does not advertise it
and librdkafka's mock cluster has no admin APIs. So the request, the errors and the retry
of a retriable one are checked against a crafted peer (``tests/_crafted_broker.py``); the
codec is checked by round trips and bytes laid out by hand in
tests/unit/test_messages_admin_ops.py (kafka-python declares no UnregisterBroker).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kontrakt.clients.admin import AdminClient
from kontrakt.errors import InvalidArgumentError, UnsupportedVersionError
from kontrakt.protocol.errors import (
    BrokerIdNotRegisteredError,
    NotControllerError,
    RequestTimedOutError,
)
from kontrakt.protocol.messages import UnregisterBrokerResponse
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import FAST, run

UNREGISTER_BROKER = 64
REQUEST_TIMED_OUT, BROKER_ID_NOT_REGISTERED, NOT_CONTROLLER = 7, 102, 41


class Controller:
    """Answers UnregisterBroker with the error codes of ``errors`` in turn (the last one
    from then on)."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors) or [0]
        self.asked: list[int] = []

    def __call__(self, ver: int, req: Any) -> Any:
        self.asked.append(req.broker_id)
        code = self.errors.pop(0) if len(self.errors) > 1 else self.errors[0]
        return UnregisterBrokerResponse(error_code=code,
                                        error_message="no such broker" if code else None)


def test_the_broker_id_is_sent_and_success_returns_none() -> None:
    controller = Controller()
    assert run(CraftedBroker({UNREGISTER_BROKER: controller}),
               lambda a: a.unregister_broker(7)) is None
    assert controller.asked == [7]


def test_an_unregistered_broker_is_a_typed_error_with_the_brokers_message() -> None:
    controller = Controller(BROKER_ID_NOT_REGISTERED)
    with pytest.raises(BrokerIdNotRegisteredError, match="unregister broker 7: no such"):
        run(CraftedBroker({UNREGISTER_BROKER: controller}),
            lambda a: a.unregister_broker(7, timeout=10))
    assert controller.asked == [7]  # not retried


def test_a_forwarding_timeout_is_retried() -> None:
    controller = Controller(REQUEST_TIMED_OUT, 0)
    run(CraftedBroker({UNREGISTER_BROKER: controller}),
        lambda a: a.unregister_broker(7, timeout=10))
    assert controller.asked == [7, 7]


def test_another_retriable_answer_is_final_as_in_java() -> None:
    controller = Controller(NOT_CONTROLLER, 0)
    with pytest.raises(NotControllerError):
        run(CraftedBroker({UNREGISTER_BROKER: controller}),
            lambda a: a.unregister_broker(7, timeout=10))
    assert controller.asked == [7]
    assert NotControllerError.retriable  # the premise


def test_a_timeout_that_lasts_ends_the_call_with_it() -> None:
    controller = Controller(REQUEST_TIMED_OUT)
    with pytest.raises(RequestTimedOutError):
        run(CraftedBroker({UNREGISTER_BROKER: controller}),
            lambda a: a.unregister_broker(7, timeout=0.5))
    assert len(controller.asked) >= 2


def test_a_broker_without_the_api_raises_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersionError):
        run(CraftedBroker({}), lambda a: a.unregister_broker(7, timeout=5))


@pytest.mark.parametrize("broker_id", [-1, True, "7", 2**31, None])
def test_bad_ids_are_refused_before_anything_is_sent(broker_id: Any) -> None:
    controller = Controller()
    with pytest.raises(InvalidArgumentError):
        run(CraftedBroker({UNREGISTER_BROKER: controller}),
            lambda a: a.unregister_broker(broker_id))
    assert controller.asked == []


def test_the_blocking_client_unregisters_too() -> None:
    controller = Controller()

    async def main() -> Any:
        async with CraftedBroker({UNREGISTER_BROKER: controller}) as broker:
            def blocking() -> Any:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    return admin.unregister_broker(3, timeout=10)
            return await asyncio.to_thread(blocking)

    assert asyncio.run(main()) is None
    assert controller.asked == [3]
