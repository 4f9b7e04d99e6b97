"""Blocking forms of the consumer group, committed offset, partition-leader (offsets,
records, producers) and transaction operations — a base class of
:class:`~kontrakt.clients.admin.AdminClient`, matching :mod:`._groups`, :mod:`._offsets`,
:mod:`._records` and :mod:`._transactions` on the async side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients.admin._offsets import OffsetShift
from kontrakt.clients.admin._sync_base import SyncAdminBase
from kontrakt.clients.admin._transactions import (
    AbortTransactionSpec,
    HangingTransaction,
    ProducerIdAndEpoch,
)
from kontrakt.clients.admin._types import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupState,
    ConsumerGroupType,
    DeletedRecords,
    GroupListing,
    IsolationLevel,
    ListOffsetsResultInfo,
    OffsetSpec,
    ProducerState,
    ShareGroupDescription,
    TransactionDescription,
    TransactionListing,
)

__all__ = ["SyncGroupOperations"]


class SyncGroupOperations(SyncAdminBase):
    """Blocking group, offset, record and transaction operations."""

    def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartition, None]:
        """Blocking form of :meth:`AsyncAdminClient.alter_consumer_group_offsets``."""
        return self._run(
            self._async.alter_consumer_group_offsets(
                group_id, offsets, timeout=timeout, return_exceptions=return_exceptions
            )
        )

    def delete_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartition, None]:
        """Blocking form of :meth:`AsyncAdminClient.delete_consumer_group_offsets``."""
        return self._run(
            self._async.delete_consumer_group_offsets(
                group_id, partitions, timeout=timeout, return_exceptions=return_exceptions
            )
        )

    def reset_group_offsets(
        self,
        group_id: str,
        specs: Mapping[TopicPartition, OffsetSpec | OffsetShift | int],
        *,
        dry_run: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartition, int]:
        """Blocking form of :meth:`AsyncAdminClient.reset_group_offsets``."""
        return self._run(
            self._async.reset_group_offsets(
                group_id, specs, dry_run=dry_run, timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

    def remove_members_from_consumer_group(
        self,
        group_id: str,
        members: Iterable[str] | None = None,
        *,
        reason: str | None = None,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, None]:
        """Blocking form of :meth:`AsyncAdminClient.remove_members_from_consumer_group``."""
        return self._run(
            self._async.remove_members_from_consumer_group(
                group_id, members, reason=reason, timeout=timeout,
                return_exceptions=return_exceptions
            )
        )

    def delete_consumer_groups(
        self,
        group_ids: Iterable[str],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, None]:
        """Blocking form of :meth:`AsyncAdminClient.delete_consumer_groups``."""
        return self._run(
            self._async.delete_consumer_groups(
                group_ids, timeout=timeout, return_exceptions=return_exceptions
            )
        )

    def delete_records(
        self,
        before_offsets: Mapping[TopicPartition, int],
        *,
        operation_timeout: float | None = None,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartition, DeletedRecords]:
        """Blocking form of :meth:`AsyncAdminClient.delete_records``."""
        return self._run(
            self._async.delete_records(
                before_offsets,
                operation_timeout=operation_timeout,
                timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

    def describe_consumer_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, ConsumerGroupDescription]:
        """Blocking form of :meth:`AsyncAdminClient.describe_consumer_groups``."""
        return self._run(
            self._async.describe_consumer_groups(
                group_ids,
                include_authorized_operations=include_authorized_operations,
                timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

    def describe_share_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, ShareGroupDescription]:
        """Blocking form of :meth:`AsyncAdminClient.describe_share_groups``."""
        return self._run(
            self._async.describe_share_groups(
                group_ids,
                include_authorized_operations=include_authorized_operations,
                timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

    def describe_producers(
        self,
        partitions: Iterable[TopicPartition],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartition, list[ProducerState]]:
        """Blocking form of :meth:`AsyncAdminClient.describe_producers``."""
        return self._run(
            self._async.describe_producers(
                partitions, timeout=timeout, return_exceptions=return_exceptions
            )
        )

    def abort_transaction(
        self, spec: AbortTransactionSpec, *, timeout: float | None = None
    ) -> None:
        """Blocking form of :meth:`AsyncAdminClient.abort_transaction`."""
        return self._run(self._async.abort_transaction(spec, timeout=timeout))

    def describe_transactions(
        self,
        transactional_ids: Iterable[str],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, TransactionDescription]:
        """Blocking form of :meth:`AsyncAdminClient.describe_transactions``."""
        return self._run(
            self._async.describe_transactions(
                transactional_ids, timeout=timeout, return_exceptions=return_exceptions
            )
        )

    def fence_producers(
        self,
        transactional_ids: Iterable[str],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, ProducerIdAndEpoch]:
        """Blocking form of :meth:`AsyncAdminClient.fence_producers`."""
        return self._run(
            self._async.fence_producers(
                transactional_ids, timeout=timeout, return_exceptions=return_exceptions
            )
        )

    def force_terminate_transaction(
        self, transactional_id: str, *, timeout: float | None = None
    ) -> None:
        """Blocking form of :meth:`AsyncAdminClient.force_terminate_transaction`."""
        return self._run(
            self._async.force_terminate_transaction(transactional_id, timeout=timeout)
        )

    def find_hanging_transactions(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        broker_ids: Iterable[int] | None = None,
        max_transaction_timeout_ms: int = 900000,
        timeout: float | None = None,
    ) -> list[HangingTransaction]:
        """Blocking form of :meth:`AsyncAdminClient.find_hanging_transactions`."""
        return self._run(
            self._async.find_hanging_transactions(
                partitions,
                broker_ids=broker_ids,
                max_transaction_timeout_ms=max_transaction_timeout_ms,
                timeout=timeout,
            )
        )

    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Blocking form of :meth:`AsyncAdminClient.list_consumer_group_offsets``."""
        return self._run(
            self._async.list_consumer_group_offsets(
                group_id,
                partitions,
                require_stable=require_stable,
                timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

    def list_consumer_groups(
        self,
        *,
        states: Iterable[ConsumerGroupState] | None = None,
        types: Iterable[ConsumerGroupType] | None = None,
        timeout: float | None = None,
    ) -> list[ConsumerGroupListing]:
        """Blocking form of :meth:`AsyncAdminClient.list_consumer_groups``."""
        return self._run(
            self._async.list_consumer_groups(states=states, types=types, timeout=timeout)
        )

    def list_groups(
        self,
        *,
        states: Iterable[ConsumerGroupState | str] | None = None,
        types: Iterable[ConsumerGroupType | str] | None = None,
        timeout: float | None = None,
    ) -> list[GroupListing]:
        """Blocking form of :meth:`AsyncAdminClient.list_groups``."""
        return self._run(self._async.list_groups(states=states, types=types, timeout=timeout))

    def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec],
        *,
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartition, ListOffsetsResultInfo]:
        """Blocking form of :meth:`AsyncAdminClient.list_offsets``."""
        return self._run(
            self._async.list_offsets(
                specs,
                isolation_level=isolation_level,
                timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

    def list_transactions(
        self,
        *,
        states: Iterable[str] | None = None,
        producer_ids: Iterable[int] | None = None,
        duration_filter_ms: int | None = None,
        timeout: float | None = None,
    ) -> list[TransactionListing]:
        """Blocking form of :meth:`AsyncAdminClient.list_transactions``."""
        return self._run(
            self._async.list_transactions(
                states=states,
                producer_ids=producer_ids,
                duration_filter_ms=duration_filter_ms,
                timeout=timeout,
            )
        )
