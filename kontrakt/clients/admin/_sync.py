"""AdminClient: the blocking form of :class:`AsyncAdminClient`, run on a private event loop
in a daemon thread (:class:`~kontrakt.clients._sync.LoopThread`).

Every method blocks until the async call finishes (each call honours its own ``timeout``).
Calling from the loop thread itself raises :class:`~kontrakt.errors.IllegalStateError`.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients._sync import LoopThread, close_sync, ensure_started
from kontrakt.clients.admin._admin import AsyncAdminClient
from kontrakt.clients.admin._partition_admin import (
    ElectionType,
    FeatureMetadata,
    FeatureUpdate,
    PartitionReassignment,
)
from kontrakt.clients.admin._quotas import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
)
from kontrakt.clients.admin._scram import (
    UserScramCredentialAlteration,
    UserScramCredentialsDescription,
)
from kontrakt.clients.admin._tokens import DelegationToken, KafkaPrincipal
from kontrakt.clients.admin._types import (
    AclBinding,
    AclBindingFilter,
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupState,
    ConsumerGroupType,
    CreatedTopic,
    DeletedRecords,
    IsolationLevel,
    ListOffsetsResultInfo,
    LogDirDescription,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ProducerState,
    TopicDescription,
    TransactionDescription,
    TransactionListing,
)
from kontrakt.clients.client import KafkaClient

__all__ = ["AdminClient"]

T = TypeVar("T")


class AdminClient:
    """Blocking Kafka admin client; same options, methods and results as
    :class:`AsyncAdminClient`.

    Args:
        config: Kafka property names to values.
        **kwargs: the same options with snake_case names.

    Raises:
        ConfigError: unknown option or bad value.

    The constructor returns at once; the first call connects (waiting up to
    ``request.timeout.ms``, then raising NoBrokersAvailableError naming each broker tried
    and why). An admin client dropped without :meth:`close` is closed when it is
    garbage-collected.

    Example::

        with AdminClient({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
            admin.create_topics([NewTopic("orders", 3)])
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._thread = LoopThread("kontrakt-admin")
        try:
            self._async: AsyncAdminClient = self._thread.run(_build(config, kwargs))
        except BaseException:
            self._thread.stop()
            raise
        self._async.client.owner = "AdminClient"
        self._thread.attach(self, self._async.close)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._thread.run(ensure_started(self._async.client, coro))

    def close(self, timeout: float | None = None) -> None:
        """Close connections and stop the loop thread. Idempotent.

        Args:
            timeout: seconds the close may take (None: about a second at most); bounded
                even with every broker gone.
        """
        close_sync(self._thread, self._async.close, timeout)

    def metrics(self) -> dict[str, Any]:
        """See :meth:`AsyncAdminClient.metrics`."""
        if not self._thread.running:
            return self._async.metrics()  # closed: nothing updates them any more

        async def on_loop() -> dict[str, Any]:
            return self._async.metrics()
        return self._thread.run(on_loop())

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def alter_configs(
        self,
        configs: Mapping[ConfigResource, Mapping[str, str]],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[ConfigResource, None]:
        """Blocking form of :meth:`AsyncAdminClient.alter_configs``."""
        return self._run(
            self._async.alter_configs(
                configs,
                validate_only=validate_only,
                timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

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

    def alter_client_quotas(
        self,
        alterations: Iterable[ClientQuotaAlteration],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[ClientQuotaEntity, None]:
        """Blocking form of :meth:`AsyncAdminClient.alter_client_quotas`."""
        return self._run(
            self._async.alter_client_quotas(
                alterations, validate_only=validate_only, timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

    def create_delegation_token(
        self,
        *,
        owner: KafkaPrincipal | None = None,
        renewers: Iterable[KafkaPrincipal] | None = None,
        max_lifetime_ms: int = -1,
        timeout: float | None = None,
    ) -> DelegationToken:
        """Blocking form of :meth:`AsyncAdminClient.create_delegation_token`."""
        return self._run(
            self._async.create_delegation_token(
                owner=owner, renewers=renewers, max_lifetime_ms=max_lifetime_ms,
                timeout=timeout,
            )
        )

    def describe_client_quotas(
        self,
        filter: ClientQuotaFilter | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Blocking form of :meth:`AsyncAdminClient.describe_client_quotas`."""
        return self._run(self._async.describe_client_quotas(filter, timeout=timeout))

    def describe_delegation_token(
        self,
        owners: Iterable[KafkaPrincipal] | None = None,
        *,
        timeout: float | None = None,
    ) -> list[DelegationToken]:
        """Blocking form of :meth:`AsyncAdminClient.describe_delegation_token`."""
        return self._run(self._async.describe_delegation_token(owners, timeout=timeout))

    def expire_delegation_token(
        self,
        hmac: bytes,
        *,
        expiry_time_period_ms: int = -1,
        timeout: float | None = None,
    ) -> int:
        """Blocking form of :meth:`AsyncAdminClient.expire_delegation_token`."""
        return self._run(
            self._async.expire_delegation_token(
                hmac, expiry_time_period_ms=expiry_time_period_ms, timeout=timeout
            )
        )

    def renew_delegation_token(
        self,
        hmac: bytes,
        *,
        renew_time_period_ms: int = -1,
        timeout: float | None = None,
    ) -> int:
        """Blocking form of :meth:`AsyncAdminClient.renew_delegation_token`."""
        return self._run(
            self._async.renew_delegation_token(
                hmac, renew_time_period_ms=renew_time_period_ms, timeout=timeout
            )
        )

    def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialAlteration],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, None]:
        """Blocking form of :meth:`AsyncAdminClient.alter_user_scram_credentials``."""
        return self._run(
            self._async.alter_user_scram_credentials(
                alterations, timeout=timeout, return_exceptions=return_exceptions
            )
        )

    def create_acls(
        self,
        acls: Iterable[AclBinding],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[AclBinding, None]:
        """Blocking form of :meth:`AsyncAdminClient.create_acls``."""
        return self._run(
            self._async.create_acls(acls, timeout=timeout, return_exceptions=return_exceptions)
        )

    def create_partitions(
        self,
        new_partitions: Iterable[NewPartitions],
        *,
        validate_only: bool = False,
        operation_timeout: float | None = None,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, None]:
        """Blocking form of :meth:`AsyncAdminClient.create_partitions``."""
        return self._run(
            self._async.create_partitions(
                new_partitions,
                validate_only=validate_only,
                operation_timeout=operation_timeout,
                timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

    def create_topics(
        self,
        new_topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        operation_timeout: float | None = None,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, CreatedTopic]:
        """Blocking form of :meth:`AsyncAdminClient.create_topics``."""
        return self._run(
            self._async.create_topics(
                new_topics,
                validate_only=validate_only,
                operation_timeout=operation_timeout,
                timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

    def delete_acls(
        self,
        filters: Iterable[AclBindingFilter],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Blocking form of :meth:`AsyncAdminClient.delete_acls``."""
        return self._run(
            self._async.delete_acls(filters, timeout=timeout, return_exceptions=return_exceptions)
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

    def delete_topics(
        self,
        topics: Iterable[str],
        *,
        operation_timeout: float | None = None,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, None]:
        """Blocking form of :meth:`AsyncAdminClient.delete_topics``."""
        return self._run(
            self._async.delete_topics(
                topics,
                operation_timeout=operation_timeout,
                timeout=timeout,
                return_exceptions=return_exceptions,
            )
        )

    def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout: float | None = None
    ) -> list[AclBinding]:
        """Blocking form of :meth:`AsyncAdminClient.describe_acls``."""
        return self._run(self._async.describe_acls(acl_filter, timeout=timeout))

    def describe_cluster(
        self, *, include_authorized_operations: bool = False, timeout: float | None = None
    ) -> ClusterDescription:
        """Blocking form of :meth:`AsyncAdminClient.describe_cluster``."""
        return self._run(
            self._async.describe_cluster(
                include_authorized_operations=include_authorized_operations, timeout=timeout
            )
        )

    def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Blocking form of :meth:`AsyncAdminClient.describe_configs``."""
        return self._run(
            self._async.describe_configs(
                resources,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
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

    def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Blocking form of :meth:`AsyncAdminClient.describe_log_dirs``."""
        return self._run(
            self._async.describe_log_dirs(
                brokers, timeout=timeout, return_exceptions=return_exceptions
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

    def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartition, None]:
        """Blocking form of :meth:`AsyncAdminClient.elect_leaders`."""
        return self._run(self._async.elect_leaders(
            election_type, partitions, timeout=timeout, return_exceptions=return_exceptions))

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartition, None]:
        """Blocking form of :meth:`AsyncAdminClient.alter_partition_reassignments`."""
        return self._run(self._async.alter_partition_reassignments(
            reassignments, allow_replication_factor_change=allow_replication_factor_change,
            timeout=timeout, return_exceptions=return_exceptions))

    def list_partition_reassignments(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        """Blocking form of :meth:`AsyncAdminClient.list_partition_reassignments`."""
        return self._run(self._async.list_partition_reassignments(partitions, timeout=timeout))

    def describe_features(self, *, timeout: float | None = None) -> FeatureMetadata:
        """Blocking form of :meth:`AsyncAdminClient.describe_features`."""
        return self._run(self._async.describe_features(timeout=timeout))

    def update_features(
        self,
        updates: Mapping[str, FeatureUpdate],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, None]:
        """Blocking form of :meth:`AsyncAdminClient.update_features`."""
        return self._run(self._async.update_features(
            updates, validate_only=validate_only, timeout=timeout,
            return_exceptions=return_exceptions))

    def describe_topics(
        self,
        topics: Iterable[str],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, TopicDescription]:
        """Blocking form of :meth:`AsyncAdminClient.describe_topics``."""
        return self._run(
            self._async.describe_topics(
                topics, timeout=timeout, return_exceptions=return_exceptions
            )
        )

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

    def describe_user_scram_credentials(
        self,
        users: Iterable[str] | None = None,
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[str, UserScramCredentialsDescription]:
        """Blocking form of :meth:`AsyncAdminClient.describe_user_scram_credentials``."""
        return self._run(
            self._async.describe_user_scram_credentials(
                users, timeout=timeout, return_exceptions=return_exceptions
            )
        )

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[ConfigResource, None]:
        """Blocking form of :meth:`AsyncAdminClient.incremental_alter_configs``."""
        return self._run(
            self._async.incremental_alter_configs(
                changes,
                validate_only=validate_only,
                timeout=timeout,
                return_exceptions=return_exceptions,
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

    def list_topics(
        self, *, include_internal: bool = False, timeout: float | None = None
    ) -> list[str]:
        """Blocking form of :meth:`AsyncAdminClient.list_topics``."""
        return self._run(
            self._async.list_topics(include_internal=include_internal, timeout=timeout)
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


async def _build(config: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> AsyncAdminClient:
    return AsyncAdminClient(config, **kwargs)


_ = KafkaClient
