"""Delegation tokens (KIP-48, owners of KIP-373): CreateDelegationToken (38),
RenewDelegationToken (39), ExpireDelegationToken (40), DescribeDelegationToken (41), with
the checks of Kafka's ``KafkaApis`` and ``DelegationTokenManager``, and the SCRAM
credentials a token login (``tokenauth=true``) is checked against.

Tokens are enabled by ``delegation.token.secret.key`` (else DELEGATION_TOKEN_AUTH_DISABLED)
and asked for only over SASL or TLS connections that did not log in with a token (else
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED). A token's HMAC is HMAC-SHA512 of its id under the
secret; it expires ``delegation.token.expiry.time.ms`` after issue or renewal, never after
its max timestamp (issue + the smaller of the requested and the broker's max lifetime).
Expired tokens are dropped when next looked at (Kafka drops them on a timer).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    CreateDelegationTokenResponse,
    DescribeDelegationTokenResponse,
    ExpireDelegationTokenResponse,
    RenewDelegationTokenResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._acls import AclStore, Op, Res
from kontrakt.testing._cluster._sasl import ScramCredential
from kontrakt.testing._cluster._state import RequestContext

__all__ = ["DelegationTokens"]


@dataclass(slots=True)
class _Token:
    token_id: str
    hmac: bytes
    owner: str
    requester: str
    renewers: list[str]
    issue_ms: int
    expiry_ms: int
    max_ms: int
    credentials: dict[str, ScramCredential] = field(default_factory=dict)

    def may_renew(self, principal: str) -> bool:
        return principal in (self.owner, self.requester) or principal in self.renewers


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


class DelegationTokens:
    """The cluster's delegation tokens and the four APIs.

    Args:
        secret: ``delegation.token.secret.key``; None disables tokens.
        max_lifetime_ms: ``delegation.token.max.lifetime.ms``.
        expiry_time_ms: ``delegation.token.expiry.time.ms``.
        acls: the authorizer's store with ``authorizer=True``, else None (everything
            allowed, as Kafka without an authorizer).
        now_ms: the broker clock.
    """

    def __init__(self, secret: str | None, max_lifetime_ms: int, expiry_time_ms: int,
                 acls: AclStore | None, now_ms: Callable[[], int]) -> None:
        self.secret = secret
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self.acls = acls
        self.now_ms = now_ms
        self.tokens: dict[str, _Token] = {}  # by token id

    def scram_credential(self, mechanism: str, token_id: str) -> tuple[ScramCredential,
                                                                        str] | None:
        """The SCRAM credential of a live token and its owner, for a ``tokenauth`` login."""
        self._purge()
        token = self.tokens.get(token_id)
        if token is None:
            return None
        cred = token.credentials.get(mechanism)
        if cred is None:
            # Kafka's token credentials: the base64 HMAC as password, 4096 iterations.
            cred = token.credentials[mechanism] = ScramCredential.make(
                mechanism, base64.b64encode(token.hmac).decode())
        return cred, token.owner

    def _purge(self) -> None:
        now = self.now_ms()
        for token_id in [t.token_id for t in self.tokens.values()
                         if t.expiry_ms < now or t.max_ms < now]:
            del self.tokens[token_id]

    def _refused(self, ctx: RequestContext) -> int:
        if not ctx.secure or ctx.token_auth:
            return E.DelegationTokenRequestNotAllowedError.code
        if self.secret is None:
            return E.DelegationTokenAuthDisabledError.code
        return 0

    def _ok(self, ctx: RequestContext, rt: int, name: str, op: int) -> bool:
        return self.acls is None or self.acls.authorized(ctx, rt, name, op)

    def _find(self, ctx: RequestContext, mac: bytes) -> tuple[int, _Token | None]:
        code = self._refused(ctx)
        if code:
            return code, None
        self._purge()
        token = next((t for t in self.tokens.values() if hmac.compare_digest(t.hmac, mac)),
                     None)
        if token is None:
            return E.DelegationTokenNotFoundError.code, None
        if not token.may_renew(ctx.principal):
            return E.DelegationTokenOwnerMismatchError.code, None
        return 0, token

    # --- the APIs ---------------------------------------------------------------------------
    def create(self, ctx: RequestContext, version: int, req: Any) -> Response:
        cr = CreateDelegationTokenResponse
        owner = ctx.principal
        if version >= 3 and req.owner_principal_name is not None:
            owner = f"{req.owner_principal_type}:{req.owner_principal_name}"
        kind, name = _split(owner)
        code = self._refused(ctx)
        if not code and (kind != "User" or any(r.principal_type != "User"
                                               for r in req.renewers)):
            code = E.InvalidPrincipalTypeError.code
        if not code and owner != ctx.principal and not self._ok(ctx, Res.USER, owner,
                                                                Op.CREATE_TOKENS):
            code = E.DelegationTokenAuthorizationFailedError.code
        req_kind, req_name = _split(ctx.principal)
        if code:
            return cr(error_code=code, principal_type=kind, principal_name=name,
                      token_requester_principal_type=req_kind,
                      token_requester_principal_name=req_name, issue_timestamp_ms=-1,
                      expiry_timestamp_ms=-1, max_timestamp_ms=-1, token_id="", hmac=b"")
        assert self.secret is not None
        now = self.now_ms()
        lifetime = self.max_lifetime_ms if req.max_lifetime_ms <= 0 else min(
            req.max_lifetime_ms, self.max_lifetime_ms)
        token_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        token = _Token(token_id, hmac.new(self.secret.encode(), token_id.encode(),
                                          hashlib.sha512).digest(),
                       owner, ctx.principal,
                       [f"{r.principal_type}:{r.principal_name}" for r in req.renewers],
                       now, min(now + self.expiry_time_ms, now + lifetime), now + lifetime)
        self.tokens[token_id] = token
        return cr(error_code=0, principal_type=kind, principal_name=name,
                  token_requester_principal_type=req_kind,
                  token_requester_principal_name=req_name, issue_timestamp_ms=token.issue_ms,
                  expiry_timestamp_ms=token.expiry_ms, max_timestamp_ms=token.max_ms,
                  token_id=token_id, hmac=token.hmac)

    def renew(self, ctx: RequestContext, version: int, req: Any) -> Response:
        code, token = self._find(ctx, bytes(req.hmac))
        if token is None:
            return RenewDelegationTokenResponse(error_code=code, expiry_timestamp_ms=-1)
        now = self.now_ms()
        period = req.renew_period_ms if req.renew_period_ms >= 0 else self.expiry_time_ms
        token.expiry_ms = min(token.max_ms, now + period)
        return RenewDelegationTokenResponse(error_code=0, expiry_timestamp_ms=token.expiry_ms)

    def expire(self, ctx: RequestContext, version: int, req: Any) -> Response:
        code, token = self._find(ctx, bytes(req.hmac))
        if token is None:
            return ExpireDelegationTokenResponse(error_code=code, expiry_timestamp_ms=-1)
        now = self.now_ms()
        if req.expiry_time_period_ms < 0:  # expire now: the token is gone
            del self.tokens[token.token_id]
            return ExpireDelegationTokenResponse(error_code=0, expiry_timestamp_ms=now)
        token.expiry_ms = min(token.max_ms, now + req.expiry_time_period_ms)
        return ExpireDelegationTokenResponse(error_code=0, expiry_timestamp_ms=token.expiry_ms)

    def describe(self, ctx: RequestContext, version: int, req: Any) -> Response:
        dr = DescribeDelegationTokenResponse
        dt = dr.DescribedDelegationToken
        code = self._refused(ctx)
        if code:
            return dr(error_code=code)
        self._purge()
        owners = None if req.owners is None else {
            f"{o.principal_type}:{o.principal_name}" for o in req.owners}
        out = []
        for t in self.tokens.values():
            if owners is not None and t.owner not in owners:
                continue
            if not t.may_renew(ctx.principal) and not self._ok(
                    ctx, Res.DELEGATION_TOKEN, t.token_id, Op.DESCRIBE):
                continue
            kind, name = _split(t.owner)
            req_kind, req_name = _split(t.requester)
            out.append(dt(principal_type=kind, principal_name=name,
                          token_requester_principal_type=req_kind,
                          token_requester_principal_name=req_name,
                          issue_timestamp=t.issue_ms, expiry_timestamp=t.expiry_ms,
                          max_timestamp=t.max_ms, token_id=t.token_id, hmac=t.hmac,
                          renewers=[dt.DescribedDelegationTokenRenewer(
                              principal_type=_split(r)[0], principal_name=_split(r)[1])
                              for r in t.renewers]))
        return dr(error_code=0, tokens=out)
