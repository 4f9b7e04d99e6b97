"""Delegation tokens (KIP-48; owners of KIP-373) — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`, with the Java admin client's names.

A delegation token is a shared secret that the brokers issue to an authenticated principal
(its owner) so that other processes can log in as that principal with SASL/SCRAM: the user
name is the token id, the password the base64 of the HMAC, and the SCRAM login carries the
extension ``tokenauth=true`` (see :attr:`DelegationToken.scram_password`). Every request goes
to any broker (the least loaded); brokers refuse tokens over connections that were
themselves authenticated with a token, or without SASL/TLS at all
(DelegationTokenRequestNotAllowedError).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kontrakt.clients.admin._routing import Router, error_for
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.errors import InvalidArgumentError, UnsupportedVersionError
from kontrakt.protocol.messages import (
    CreateDelegationTokenRequest,
    DescribeDelegationTokenRequest,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)

__all__ = ["DelegationToken", "DelegationTokenOperations", "KafkaPrincipal", "TokenInformation"]


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """A principal as Kafka names it, e.g. ``User:alice``."""

    principal_type: str
    name: str

    @classmethod
    def from_string(cls, text: str) -> KafkaPrincipal:
        """``"User:alice"`` -> ``KafkaPrincipal("User", "alice")``.

        Raises:
            InvalidArgumentError: no ``type:`` prefix.
        """
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise InvalidArgumentError(f"a principal is 'Type:name' (e.g. 'User:alice'), "
                                       f"got {text!r}")
        return cls(kind, name)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


@dataclass(frozen=True, slots=True)
class TokenInformation:
    """What the brokers know of a token (Java's ``TokenInformation``); times are epoch ms.

    ``token_requester`` is the principal that asked for the token (None from brokers that
    answer below version 3, before KIP-373).
    """

    token_id: str
    owner: KafkaPrincipal
    token_requester: KafkaPrincipal | None
    renewers: list[KafkaPrincipal]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class DelegationToken:
    """A token and its HMAC (the secret: never shown in repr)."""

    token_info: TokenInformation
    hmac: bytes = field(repr=False)

    @property
    def scram_password(self) -> str:
        """The password of a SASL/SCRAM login with this token (user name:
        ``token_info.token_id``): the base64 of the HMAC."""
        return base64.b64encode(self.hmac).decode()


def _principals(items: Iterable[KafkaPrincipal] | None, what: str) -> list[KafkaPrincipal]:
    out = list(items or [])
    for p in out:
        if not isinstance(p, KafkaPrincipal) or not p.principal_type or not p.name:
            raise InvalidArgumentError(f"{what} must be KafkaPrincipal values with a type "
                                       f"and a name, got {p!r}")
    return out


def _hmac(value: bytes) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or not value:
        raise InvalidArgumentError("the token's hmac must be non-empty bytes "
                                   "(DelegationToken.hmac)")
    return bytes(value)


def _period(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise InvalidArgumentError(f"{what} must be milliseconds >= 0, or -1 for the "
                                   f"broker's default, got {value!r}")
    return value


class DelegationTokenOperations:
    """Delegation-token operations (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    async def _single(self, request_type: Any, build: Any, what: str,
                      timeout: float | None) -> Any:
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def attempt() -> Any:
            resp = await self._router.exchange(self._client.least_loaded_node(),
                                               request_type, build, deadline)
            if resp.error_code:
                raise error_for(resp.error_code, getattr(resp, "error_message", None), what)
            return resp

        return await self._router.call(attempt, deadline)

    async def create_delegation_token(
            self, *, owner: KafkaPrincipal | None = None,
            renewers: Iterable[KafkaPrincipal] | None = None, max_lifetime_ms: int = -1,
            timeout: float | None = None) -> DelegationToken:
        """Ask the brokers for a delegation token.

        Args:
            owner: the token's owner (KIP-373; default: the principal this client is
                logged in as). Needs CreateDelegationToken v3 (Kafka 3.3).
            renewers: principals besides the owner allowed to renew the token.
            max_lifetime_ms: the token's largest lifetime; -1: the broker's
                ``delegation.token.max.lifetime.ms``.
            timeout: seconds for the whole call (default ``default.api.timeout.ms``).

        Returns:
            the token, with its HMAC.

        Raises:
            InvalidArgumentError: a renewer or owner is not a KafkaPrincipal, or a negative
                lifetime other than -1; nothing is sent.
            UnsupportedVersionError: ``owner`` given and the broker predates KIP-373.
            BrokerResponseError: e.g. DelegationTokenAuthDisabledError (no token secret on
                the brokers), DelegationTokenRequestNotAllowedError (a PLAINTEXT or
                token-authenticated connection), DelegationTokenOwnerMismatchError.
            KafkaTimeoutError: no answer within ``timeout``, retries included.
        """
        owners = _principals([owner] if owner is not None else None, "owner")
        renew = _principals(renewers, "renewers")
        lifetime = _period(max_lifetime_ms, "max_lifetime_ms")
        req = CreateDelegationTokenRequest

        def build(version: int) -> Any:
            if owners and version < 3:
                raise UnsupportedVersionError(
                    f"create_delegation_token(owner=...) needs CreateDelegationToken v3 "
                    f"(Kafka 3.3, KIP-373); the broker offers v{version}")
            msg = req(renewers=[req.CreatableRenewers(principal_type=r.principal_type,
                                                      principal_name=r.name) for r in renew],
                      max_lifetime_ms=lifetime)
            if version >= 3:
                # null: the owner is the requester
                msg.owner_principal_type = owners[0].principal_type if owners else None
                msg.owner_principal_name = owners[0].name if owners else None
            return msg

        resp = await self._single(req, build, "create_delegation_token", timeout)
        requester = (KafkaPrincipal(resp.token_requester_principal_type,
                                    resp.token_requester_principal_name)
                     if resp.token_requester_principal_type else None)
        return DelegationToken(TokenInformation(
            resp.token_id, KafkaPrincipal(resp.principal_type, resp.principal_name), requester,
            renew, resp.issue_timestamp_ms, resp.expiry_timestamp_ms, resp.max_timestamp_ms),
            bytes(resp.hmac))

    async def renew_delegation_token(self, hmac: bytes, *, renew_time_period_ms: int = -1,
                                     timeout: float | None = None) -> int:
        """Push the token's expiry back (up to its maximum lifetime).

        Args:
            hmac: the token's HMAC (:attr:`DelegationToken.hmac`).
            renew_time_period_ms: how long from now; -1: the broker's
                ``delegation.token.expiry.time.ms``.

        Returns:
            the new expiry, epoch ms.

        Raises:
            InvalidArgumentError: an empty hmac or a bad period; nothing is sent.
            BrokerResponseError: e.g. DelegationTokenNotFoundError,
                DelegationTokenExpiredError, DelegationTokenOwnerMismatchError (not an
                owner or renewer).
            KafkaTimeoutError: no answer within ``timeout``.
        """
        secret = _hmac(hmac)
        period = _period(renew_time_period_ms, "renew_time_period_ms")
        req = RenewDelegationTokenRequest
        resp = await self._single(req, lambda v: req(hmac=secret, renew_period_ms=period),
                                  "renew_delegation_token", timeout)
        return int(resp.expiry_timestamp_ms)

    async def expire_delegation_token(self, hmac: bytes, *, expiry_time_period_ms: int = -1,
                                      timeout: float | None = None) -> int:
        """Bring the token's expiry forward to now + ``expiry_time_period_ms`` (never past
        its maximum lifetime); -1 (the default) ends the token now (brokers delete it).

        Returns:
            the new expiry, epoch ms.

        Raises:
            InvalidArgumentError: an empty hmac or a bad period; nothing is sent.
            BrokerResponseError: as :meth:`renew_delegation_token`.
            KafkaTimeoutError: no answer within ``timeout``.
        """
        secret = _hmac(hmac)
        period = _period(expiry_time_period_ms, "expiry_time_period_ms")
        req = ExpireDelegationTokenRequest
        resp = await self._single(
            req, lambda v: req(hmac=secret, expiry_time_period_ms=period),
            "expire_delegation_token", timeout)
        return int(resp.expiry_timestamp_ms)

    async def describe_delegation_token(
            self, owners: Iterable[KafkaPrincipal] | None = None, *,
            timeout: float | None = None) -> list[DelegationToken]:
        """The tokens of ``owners`` (default: every token this client may see: its own,
        those it may renew, and all with DESCRIBE on the token resource).

        Raises:
            InvalidArgumentError: an owner is not a KafkaPrincipal; nothing is sent.
            BrokerResponseError: e.g. DelegationTokenAuthDisabledError.
            KafkaTimeoutError: no answer within ``timeout``.
        """
        names = None if owners is None else _principals(owners, "owners")
        req = DescribeDelegationTokenRequest
        resp = await self._single(req, lambda v: req(owners=None if names is None else [
            req.DescribeDelegationTokenOwner(principal_type=p.principal_type,
                                             principal_name=p.name) for p in names]),
            "describe_delegation_token", timeout)
        out = []
        for t in resp.tokens:
            requester = (KafkaPrincipal(t.token_requester_principal_type,
                                        t.token_requester_principal_name)
                         if t.token_requester_principal_type else None)
            out.append(DelegationToken(TokenInformation(
                t.token_id, KafkaPrincipal(t.principal_type, t.principal_name), requester,
                [KafkaPrincipal(r.principal_type, r.principal_name) for r in t.renewers],
                t.issue_timestamp, t.expiry_timestamp, t.max_timestamp), bytes(t.hmac)))
        return out
