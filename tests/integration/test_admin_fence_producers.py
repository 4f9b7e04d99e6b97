"""fence_producers against real peers.

librdkafka's mock cluster (3 brokers) is faithful for transaction coordinators
(``coordinator_set``), InitProducerId and injected errors: it checks the routing of each id
to its coordinator, the retries and the errors that are final. It hands out a new producer
id for every InitProducerId instead of bumping the epoch, so the epoch bump itself is
checked on Tansu, which bumps it as Kafka does. (Tansu drops the connection of a fenced
producer instead of answering PRODUCER_FENCED, so what the fenced producer sees is not
checked here.) The request's fields are checked against a crafted peer in
tests/unit/admin/test_admin_fence_producers.py.
"""

from __future__ import annotations

import asyncio

import pytest

from kontrakt.clients.admin import AsyncAdminClient, ProducerIdAndEpoch
from kontrakt.errors import PartialFailureError
from kontrakt.protocol.errors import (
    ConcurrentTransactionsError,
    TransactionalIdAuthorizationFailedError,
)
from kontrakt.testing import MockCluster, TansuBroker

pytestmark = pytest.mark.integration

INIT_PRODUCER_ID, FIND_COORDINATOR = 22, 10
NOT_COORDINATOR, LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS = 16, 14, 51
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def _admin(bootstrap: str) -> AsyncAdminClient:
    return AsyncAdminClient(bootstrap_servers=bootstrap, retry_backoff_ms=10,
                            retry_backoff_max_ms=50)


def test_each_id_is_fenced_at_its_own_coordinator(mock_cluster: MockCluster,
                                                  topic_name: str) -> None:
    a_id, b_id = topic_name + "-a", topic_name + "-b"
    mock_cluster.coordinator_set("transaction", a_id, 2)
    mock_cluster.coordinator_set("transaction", b_id, 3)

    async def main() -> None:
        async with _admin(mock_cluster.bootstrap_servers) as admin:
            mock_cluster.start_request_tracking()
            out = await admin.fence_producers([a_id, b_id])
            assert set(out) == {a_id, b_id}
            assert all(isinstance(r, ProducerIdAndEpoch) and r.producer_id >= 0
                       for r in out.values())
            inits = sorted(r.broker_id for r in mock_cluster.get_requests()
                           if r.api_key == INIT_PRODUCER_ID)
            assert inits == [2, 3]

    asyncio.run(main())


def test_coordinator_errors_are_retried_and_not_coordinator_looks_it_up_again(
        mock_cluster: MockCluster, topic_name: str) -> None:
    tid = topic_name + "-tx"
    mock_cluster.coordinator_set("transaction", tid, 2)

    async def main() -> None:
        async with _admin(mock_cluster.bootstrap_servers) as admin:
            await admin.fence_producers([tid])  # the coordinator is cached from here on
            mock_cluster.start_request_tracking()
            mock_cluster.push_request_errors(
                INIT_PRODUCER_ID, [CONCURRENT_TRANSACTIONS, LOAD_IN_PROGRESS, NOT_COORDINATOR])
            out = await admin.fence_producers([tid], timeout=10)
            assert out[tid].producer_id >= 0
            seen = [(r.api_key, r.broker_id) for r in mock_cluster.get_requests()
                    if r.api_key in (INIT_PRODUCER_ID, FIND_COORDINATOR)]
            # three refused InitProducerIds and the fourth that succeeded, all at the
            # coordinator; NOT_COORDINATOR made the client ask where the coordinator is
            assert [b for k, b in seen if k == INIT_PRODUCER_ID] == [2, 2, 2, 2]
            last_two = [k for k, _b in seen][-2:]
            assert last_two == [FIND_COORDINATOR, INIT_PRODUCER_ID]

    asyncio.run(main())


def test_a_refused_id_fails_alone_and_is_not_retried(mock_cluster: MockCluster,
                                                     topic_name: str) -> None:
    ok_id, refused_id = topic_name + "-ok", topic_name + "-no"
    mock_cluster.coordinator_set("transaction", ok_id, 1)
    mock_cluster.coordinator_set("transaction", refused_id, 1)

    async def main() -> None:
        async with _admin(mock_cluster.bootstrap_servers) as admin:
            mock_cluster.start_request_tracking()
            # The mock fails the next InitProducerId, whichever id it names: send the
            # refused one alone first.
            mock_cluster.push_request_errors(INIT_PRODUCER_ID,
                                             [TRANSACTIONAL_ID_AUTHORIZATION_FAILED])
            with pytest.raises(TransactionalIdAuthorizationFailedError, match=refused_id):
                await admin.fence_producers([refused_id], timeout=10)
            assert len([r for r in mock_cluster.get_requests()
                        if r.api_key == INIT_PRODUCER_ID]) == 1
            mock_cluster.push_request_errors(INIT_PRODUCER_ID, [CONCURRENT_TRANSACTIONS] * 1000)
            out = await admin.fence_producers([ok_id, refused_id], timeout=0.5,
                                              return_exceptions=True)
            assert all(isinstance(r, ConcurrentTransactionsError) for r in out.values())
            with pytest.raises(PartialFailureError):
                await admin.fence_producers([ok_id, refused_id], timeout=0.3)
            mock_cluster.clear_request_errors(INIT_PRODUCER_ID)

    asyncio.run(main())


def test_fencing_bumps_the_epoch_on_tansu(tansu_broker: TansuBroker, topic_name: str) -> None:
    tid = topic_name + "-tx"

    async def main() -> None:
        async with _admin(tansu_broker.bootstrap_servers) as admin:
            first = (await admin.fence_producers([tid]))[tid]
            second = (await admin.fence_producers([tid]))[tid]
            assert second == ProducerIdAndEpoch(first.producer_id, first.producer_epoch + 1)

    asyncio.run(main())
