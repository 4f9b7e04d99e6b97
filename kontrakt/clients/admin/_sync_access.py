"""Blocking forms of the ACL and log-dir, SCRAM credential, delegation token and client
quota operations — a base class of :class:`~kontrakt.clients.admin.AdminClient`, matching
:mod:`._acls`, :mod:`._scram`, :mod:`._tokens` and :mod:`._quotas` on the async side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kontrakt.clients.admin._acls import ReplicaLogDirInfo, TopicPartitionReplica
from kontrakt.clients.admin._quotas import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
)
from kontrakt.clients.admin._scram import (
    UserScramCredentialAlteration,
    UserScramCredentialsDescription,
)
from kontrakt.clients.admin._sync_base import SyncAdminBase
from kontrakt.clients.admin._tokens import DelegationToken, KafkaPrincipal
from kontrakt.clients.admin._types import (
    AclBinding,
    AclBindingFilter,
    LogDirDescription,
)

__all__ = ["SyncAccessOperations"]


class SyncAccessOperations(SyncAdminBase):
    """Blocking ACL, log-dir, SCRAM, token and quota operations."""

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

    def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout: float | None = None
    ) -> list[AclBinding]:
        """Blocking form of :meth:`AsyncAdminClient.describe_acls``."""
        return self._run(self._async.describe_acls(acl_filter, timeout=timeout))

    def alter_replica_log_dirs(
        self,
        replica_assignments: Mapping[TopicPartitionReplica, str],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartitionReplica, None]:
        """Blocking form of :meth:`AsyncAdminClient.alter_replica_log_dirs`."""
        return self._run(
            self._async.alter_replica_log_dirs(
                replica_assignments, timeout=timeout, return_exceptions=return_exceptions
            )
        )

    def describe_replica_log_dirs(
        self,
        replicas: Iterable[TopicPartitionReplica],
        *,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> dict[TopicPartitionReplica, ReplicaLogDirInfo]:
        """Blocking form of :meth:`AsyncAdminClient.describe_replica_log_dirs`."""
        return self._run(
            self._async.describe_replica_log_dirs(
                replicas, timeout=timeout, return_exceptions=return_exceptions
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
