"""A delegation-token store answering Create/Renew/Expire/DescribeDelegationToken for the
crafted admin broker (``_crafted.py``), following Kafka's DelegationTokenManager: tokens keyed
by HMAC, renewals capped at the maximum lifetime, a negative expiry period deleting the token,
describe filtered by owner. The requester is always ``User:admin``.
"""

from __future__ import annotations

import hashlib
import hmac as hmac_mod
import secrets
from typing import Any

from kontrakt.protocol.messages import (
    CreateDelegationTokenResponse,
    DescribeDelegationTokenResponse,
    ExpireDelegationTokenResponse,
    RenewDelegationTokenResponse,
)

NOW = 1_700_000_000_000
MAX_LIFETIME = 7 * 24 * 3600 * 1000
EXPIRY = 24 * 3600 * 1000
TOKEN_NOT_FOUND, TOKEN_EXPIRED = 62, 66


class TokenStore:
    """The broker's side, as Kafka's DelegationTokenManager behaves (the requester is
    ``User:admin``)."""

    def __init__(self) -> None:
        self.tokens: dict[bytes, dict[str, Any]] = {}
        self.secret = secrets.token_bytes(16)

    def handlers(self) -> dict[int, Any]:
        return {38: self.create, 39: self.renew, 40: self.expire, 41: self.describe}

    def create(self, ver: int, req: Any) -> Any:
        token_id = secrets.token_hex(8)
        mac = hmac_mod.new(self.secret, token_id.encode(), hashlib.sha512).digest()
        owner = (req.owner_principal_type or "User", req.owner_principal_name or "admin") \
            if ver >= 3 else ("User", "admin")
        lifetime = MAX_LIFETIME if req.max_lifetime_ms <= 0 else req.max_lifetime_ms
        t = {"id": token_id, "owner": owner, "renewers": [
            (r.principal_type, r.principal_name) for r in req.renewers],
            "issue": NOW, "expiry": NOW + min(EXPIRY, lifetime), "max": NOW + lifetime}
        self.tokens[mac] = t
        r = CreateDelegationTokenResponse(
            principal_type=owner[0], principal_name=owner[1], issue_timestamp_ms=t["issue"],
            expiry_timestamp_ms=t["expiry"], max_timestamp_ms=t["max"], token_id=token_id,
            hmac=mac)
        if ver >= 3:
            r.token_requester_principal_type, r.token_requester_principal_name = "User", "admin"
        return r

    def renew(self, ver: int, req: Any) -> Any:
        t = self.tokens.get(bytes(req.hmac))
        if t is None:
            return RenewDelegationTokenResponse(error_code=TOKEN_NOT_FOUND)
        if t["expiry"] < NOW:
            return RenewDelegationTokenResponse(error_code=TOKEN_EXPIRED)
        period = EXPIRY if req.renew_period_ms < 0 else req.renew_period_ms
        t["expiry"] = min(t["max"], NOW + period)
        return RenewDelegationTokenResponse(expiry_timestamp_ms=t["expiry"])

    def expire(self, ver: int, req: Any) -> Any:
        t = self.tokens.get(bytes(req.hmac))
        if t is None:
            return ExpireDelegationTokenResponse(error_code=TOKEN_NOT_FOUND)
        if req.expiry_time_period_ms < 0:
            del self.tokens[bytes(req.hmac)]
            return ExpireDelegationTokenResponse(expiry_timestamp_ms=NOW)
        t["expiry"] = min(t["max"], NOW + req.expiry_time_period_ms)
        return ExpireDelegationTokenResponse(expiry_timestamp_ms=t["expiry"])

    def describe(self, ver: int, req: Any) -> Any:
        d = DescribeDelegationTokenResponse.DescribedDelegationToken
        owners = None if req.owners is None else {
            (o.principal_type, o.principal_name) for o in req.owners}
        out = []
        for mac, t in self.tokens.items():
            if owners is not None and t["owner"] not in owners:
                continue
            token = d(principal_type=t["owner"][0], principal_name=t["owner"][1],
                      issue_timestamp=t["issue"], expiry_timestamp=t["expiry"],
                      max_timestamp=t["max"], token_id=t["id"], hmac=mac,
                      renewers=[d.DescribedDelegationTokenRenewer(principal_type=a,
                                                                  principal_name=b)
                                for a, b in t["renewers"]])
            if ver >= 3:
                token.token_requester_principal_type = "User"
                token.token_requester_principal_name = "admin"
            out.append(token)
        return DescribeDelegationTokenResponse(tokens=out)
