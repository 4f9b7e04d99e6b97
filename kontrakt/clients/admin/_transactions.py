"""Admin operations on transactions — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`: DescribeTransactions goes to each
transactional id's coordinator (see :meth:`Router.per_coordinator`); ListTransactions goes
to every broker and is merged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._routing import Router, error_for, finish
from kontrakt.clients.admin._types import TransactionDescription, TransactionListing
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.errors import InvalidArgumentError, UnsupportedVersionError
from kontrakt.protocol.messages import DescribeTransactionsRequest, ListTransactionsRequest
from kontrakt.protocol.spec import Request

__all__ = ["TransactionOperations"]

TP = TopicPartition


class TransactionOperations:
    """Transaction operations (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    async def describe_transactions(self, transactional_ids: Iterable[str], *,
                                    timeout: float | None = None,
                                    return_exceptions: bool = False
                                    ) -> dict[str, TransactionDescription]:
        """Describe transactions, asking each transactional id's coordinator.

        Raises:
            InvalidArgumentError: an empty transactional id.
            PartialFailureError: some ids failed (e.g. ``TransactionalIdNotFoundError``).
        """
        ids = v.unique((_check_txn_id(t) for t in transactional_ids), "transactional id")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DescribeTransactionsRequest

        async def send(node: int, batch: list[str]) -> dict[str, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                transactional_ids=batch), deadline)
            return {s.transactional_id: error_for(
                s.error_code, None, f"transactional id {s.transactional_id!r}")
                if s.error_code else TransactionDescription(
                    s.transactional_id, node, s.transaction_state, s.producer_id,
                    s.producer_epoch, s.transaction_timeout_ms, s.transaction_start_time_ms,
                    tuple(TP(t.topic, p) for t in s.topics for p in t.partitions))
                for s in resp.transaction_states}

        results = await self._router.per_coordinator(ids, "transaction", deadline, send)
        return finish(results, "describe_transactions", return_exceptions)

    async def list_transactions(self, *, states: Iterable[str] | None = None,
                                producer_ids: Iterable[int] | None = None,
                                duration_filter_ms: int | None = None,
                                timeout: float | None = None) -> list[TransactionListing]:
        """Transactions known to every broker's transaction coordinator, merged.

        Args:
            states: only these states (e.g. ``Ongoing``).
            producer_ids: only these producers.
            duration_filter_ms: only transactions open longer than this (ListTransactions
                v1+).

        Raises:
            PartialFailureError: a broker failed; ``.results`` maps broker id to its list
                or its error.
        """
        await self._client.start()
        deadline = self._router.deadline(timeout)
        req = ListTransactionsRequest

        def build(version: int) -> Request:
            if duration_filter_ms is not None and version < 1:
                raise UnsupportedVersionError("ListTransactions v0 cannot filter by duration")
            return req(state_filters=list(states or ()), producer_id_filters=list(
                producer_ids or ()), duration_filter=(
                -1 if duration_filter_ms is None else duration_filter_ms))

        async def send(node: int, _b: list[int]) -> dict[int, Any]:
            resp = await self._router.exchange(node, req, build, deadline)
            if resp.error_code:
                return {node: error_for(resp.error_code, None, f"broker {node}")}
            return {node: [TransactionListing(s.transactional_id, s.producer_id,
                                              s.transaction_state)
                           for s in resp.transaction_states]}

        results = await self._router.per_entity(
            self._router.brokers(),
            lambda batch: self._router.fan_out({b: [b] for b in batch}, send), deadline)
        finish(results, "list_transactions", False)
        merged = {t.transactional_id: t for listing in results.values() for t in listing}
        return [merged[k] for k in sorted(merged)]



def _check_txn_id(tid: object) -> str:
    if not isinstance(tid, str) or not tid:
        raise InvalidArgumentError(f"transactional id must be a non-empty str, got {tid!r}")
    return tid
