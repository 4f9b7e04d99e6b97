"""AdminClient: the blocking form of :class:`AsyncAdminClient`, run on a private event loop
in a daemon thread (:class:`~kontrakt.clients._sync.LoopThread`).

Every method blocks until the async call finishes (each call honours its own ``timeout``).
Calling from the loop thread itself raises :class:`~kontrakt.errors.IllegalStateError`.

This module holds the client's lifecycle and its topic, partition, config and cluster
calls (the async side's :mod:`._admin`, :mod:`._configs` and :mod:`._partition_admin`);
the other families' blocking forms are its base classes, :mod:`._sync_groups` and
:mod:`._sync_access`, over :mod:`._sync_base` (the loop thread and the one way a call runs
on it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients._sync import LoopThread, close_sync
from kontrakt.clients.admin._admin import AsyncAdminClient
from kontrakt.clients.admin._partition_admin import (
    ElectionType,
    FeatureMetadata,
    FeatureUpdate,
    PartitionReassignment,
    TopicPartitionsPage,
)
from kontrakt.clients.admin._quorum import QuorumInfo, RaftVoterEndpoint
from kontrakt.clients.admin._sync_access import SyncAccessOperations
from kontrakt.clients.admin._sync_groups import SyncGroupOperations
from kontrakt.clients.admin._types import (
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    CreatedTopic,
    NewPartitions,
    NewTopic,
    TopicDescription,
)
from kontrakt.clients.client import KafkaClient

__all__ = ["AdminClient"]


class AdminClient(SyncGroupOperations, SyncAccessOperations):
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
            self._async = self._thread.run(_build(config, kwargs))
        except BaseException:
            self._thread.stop()
            raise
        self._async.client.owner = "AdminClient"
        self._thread.attach(self, self._async.close)

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

    def describe_cluster(
        self, *, include_authorized_operations: bool = False, timeout: float | None = None
    ) -> ClusterDescription:
        """Blocking form of :meth:`AsyncAdminClient.describe_cluster``."""
        return self._run(
            self._async.describe_cluster(
                include_authorized_operations=include_authorized_operations, timeout=timeout
            )
        )

    def list_config_resources(
        self,
        resource_types: Iterable[ConfigResourceType | str] | None = None,
        *,
        timeout: float | None = None,
    ) -> list[ConfigResource]:
        """Blocking form of :meth:`AsyncAdminClient.list_config_resources`."""
        return self._run(self._async.list_config_resources(resource_types, timeout=timeout))

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

    def reset_configs(
        self,
        resources: Mapping[ConfigResource, Iterable[str] | None],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[ConfigResource, tuple[str, ...]]:
        """Blocking form of :meth:`AsyncAdminClient.reset_configs`."""
        return self._run(self._async.reset_configs(
            resources, validate_only=validate_only, timeout=timeout,
            return_exceptions=return_exceptions))

    def wait_for_topics(self, topics: Iterable[str], *, timeout: float | None = None) -> None:
        """Blocking form of :meth:`AsyncAdminClient.wait_for_topics`."""
        self._run(self._async.wait_for_topics(topics, timeout=timeout))

    def describe_topic_partitions(
        self,
        topics: Iterable[str] | None,
        *,
        response_partition_limit: int = 2000,
        cursor: TopicPartition | None = None,
        all_pages: bool = False,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> TopicPartitionsPage:
        """Blocking form of :meth:`AsyncAdminClient.describe_topic_partitions`."""
        return self._run(self._async.describe_topic_partitions(
            topics, response_partition_limit=response_partition_limit, cursor=cursor,
            all_pages=all_pages, timeout=timeout, return_exceptions=return_exceptions))

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

    def describe_metadata_quorum(self, *, timeout: float | None = None) -> QuorumInfo:
        """Blocking form of :meth:`AsyncAdminClient.describe_metadata_quorum`."""
        return self._run(self._async.describe_metadata_quorum(timeout=timeout))

    def add_raft_voter(
        self,
        voter_id: int,
        voter_directory_id: uuid.UUID,
        endpoints: Iterable[RaftVoterEndpoint],
        *,
        cluster_id: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """Blocking form of :meth:`AsyncAdminClient.add_raft_voter`."""
        return self._run(self._async.add_raft_voter(
            voter_id, voter_directory_id, endpoints, cluster_id=cluster_id, timeout=timeout))

    def remove_raft_voter(
        self,
        voter_id: int,
        voter_directory_id: uuid.UUID,
        *,
        cluster_id: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """Blocking form of :meth:`AsyncAdminClient.remove_raft_voter`."""
        return self._run(self._async.remove_raft_voter(
            voter_id, voter_directory_id, cluster_id=cluster_id, timeout=timeout))

    def unregister_broker(self, broker_id: int, *, timeout: float | None = None) -> None:
        """Blocking form of :meth:`AsyncAdminClient.unregister_broker`."""
        return self._run(self._async.unregister_broker(broker_id, timeout=timeout))

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

    def list_topics(
        self, *, include_internal: bool = False, timeout: float | None = None
    ) -> list[str]:
        """Blocking form of :meth:`AsyncAdminClient.list_topics``."""
        return self._run(
            self._async.list_topics(include_internal=include_internal, timeout=timeout)
        )

    def cluster_id(self, timeout: float | None = None) -> str | None:
        """Blocking form of :meth:`AsyncAdminClient.cluster_id`."""
        return self._thread.run(self._async.cluster_id(timeout))

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """See :meth:`AsyncAdminClient.set_sasl_credentials`; safe from any thread."""
        self._async.set_sasl_credentials(username, password)


async def _build(config: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> AsyncAdminClient:
    return AsyncAdminClient(config, **kwargs)


_ = KafkaClient
