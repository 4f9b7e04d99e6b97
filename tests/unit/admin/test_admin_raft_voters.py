"""add_raft_voter and remove_raft_voter against a crafted broker.

Neither test broker answers AddRaftVoter or RemoveRaftVoter (APIs 80, 81): Tansu 0.6.0 and
librdkafka's mock cluster run no KRaft quorum. So the requests, the errors (final, as in
Java's admin client) and the retry after a dropped connection are checked against a
crafted peer (``tests/_crafted_broker.py``); the codecs by round trips and bytes laid out
by hand in tests/unit/test_messages_admin_ops.py (kafka-python declares neither API).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from kontrakt.clients.admin import AdminClient, RaftVoterEndpoint
from kontrakt.errors import InvalidArgumentError
from kontrakt.protocol.errors import (
    DuplicateVoterError,
    RequestTimedOutError,
    VoterNotFoundError,
)
from kontrakt.protocol.messages import AddRaftVoterResponse, RemoveRaftVoterResponse
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import FAST, run

ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 80, 81
DIRECTORY = uuid.UUID(int=0x1234)
ENDPOINTS = [RaftVoterEndpoint("CONTROLLER", "c3", 9093)]


class Controller:
    """Answers AddRaftVoter / RemoveRaftVoter with the codes of ``errors`` in turn (the
    last from then on); None drops the connection instead."""

    def __init__(self, *errors: int | None) -> None:
        self.errors = list(errors) or [0]
        self.asked: list[tuple[int, Any]] = []

    def __call__(self, ver: int, req: Any) -> Any:
        self.asked.append((ver, req))
        code = self.errors.pop(0) if len(self.errors) > 1 else self.errors[0]
        if code is None:
            return None
        resp = AddRaftVoterResponse if hasattr(req, "listeners") else RemoveRaftVoterResponse
        return resp(error_code=code, error_message="refused" if code else None)


def _handlers(c: Controller) -> dict[int, Any]:
    return {ADD_RAFT_VOTER: c, REMOVE_RAFT_VOTER: c}


def test_add_sends_the_voter_its_listeners_and_the_time_left() -> None:
    c = Controller()
    assert run(CraftedBroker(_handlers(c)), lambda a: a.add_raft_voter(
        3, DIRECTORY, ENDPOINTS, cluster_id="k1", timeout=8)) is None
    [(version, req)] = c.asked
    assert version == 1
    assert (req.cluster_id, req.voter_id, req.voter_directory_id, req.ack_when_committed) == (
        "k1", 3, DIRECTORY, True)
    assert [(x.name, x.host, x.port) for x in req.listeners] == [("CONTROLLER", "c3", 9093)]
    assert 5000 < req.timeout_ms <= 8000  # what is left of the call's timeout


def test_remove_sends_the_voter_without_a_cluster_id_by_default() -> None:
    c = Controller()
    run(CraftedBroker(_handlers(c)), lambda a: a.remove_raft_voter(3, DIRECTORY))
    [(version, req)] = c.asked
    assert (version, req.cluster_id, req.voter_id, req.voter_directory_id) == (
        0, None, 3, DIRECTORY)


@pytest.mark.parametrize(("call", "code", "error"), [
    ("add", 126, DuplicateVoterError),
    ("remove", 127, VoterNotFoundError),
    ("add", 7, RequestTimedOutError),  # retriable, but the voter set may have changed
])
def test_an_answer_is_raised_with_its_message_and_not_retried(
        call: str, code: int, error: type[Exception]) -> None:
    c = Controller(code)
    with pytest.raises(error, match="voter 3: refused"):
        run(CraftedBroker(_handlers(c)), lambda a: a.add_raft_voter(
            3, DIRECTORY, ENDPOINTS, timeout=10) if call == "add" else a.remove_raft_voter(
            3, DIRECTORY, timeout=10))
    assert len(c.asked) == 1


def test_a_request_without_an_answer_is_sent_again() -> None:
    c = Controller(None, 0)
    run(CraftedBroker(_handlers(c)), lambda a: a.remove_raft_voter(3, DIRECTORY, timeout=10))
    assert len(c.asked) == 2


@pytest.mark.parametrize(("voter_id", "directory"), [
    (-1, DIRECTORY), (True, DIRECTORY), (2**31, DIRECTORY), (3, uuid.UUID(int=0)),
    (3, str(DIRECTORY)),
])
def test_a_bad_voter_is_refused_before_anything_is_sent(voter_id: Any, directory: Any) -> None:
    c = Controller()
    with pytest.raises(InvalidArgumentError):
        run(CraftedBroker(_handlers(c)), lambda a: a.add_raft_voter(
            voter_id, directory, ENDPOINTS))
    with pytest.raises(InvalidArgumentError):
        run(CraftedBroker(_handlers(c)), lambda a: a.remove_raft_voter(voter_id, directory))
    assert c.asked == []


@pytest.mark.parametrize("endpoints", [
    [], [RaftVoterEndpoint("", "h", 1)], [RaftVoterEndpoint("C", "", 1)],
    [RaftVoterEndpoint("C", "h", 70000)], [("C", "h", 1)],
])
def test_bad_endpoints_are_refused_before_anything_is_sent(endpoints: list[Any]) -> None:
    c = Controller()
    with pytest.raises(InvalidArgumentError):
        run(CraftedBroker(_handlers(c)), lambda a: a.add_raft_voter(3, DIRECTORY, endpoints))
    assert c.asked == []


def test_the_blocking_client_changes_voters_too() -> None:
    c = Controller()

    async def main() -> None:
        async with CraftedBroker(_handlers(c)) as broker:
            def blocking() -> None:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    admin.add_raft_voter(3, DIRECTORY, ENDPOINTS, timeout=10)
                    admin.remove_raft_voter(3, DIRECTORY, timeout=10)
            await asyncio.to_thread(blocking)

    asyncio.run(main())
    assert [type(r).__name__ for _v, r in c.asked] == ["AddRaftVoterRequest",
                                                      "RemoveRaftVoterRequest"]
