"""Optional authentication for the embedded registry: HTTP basic users and bearer tokens,
each with a role, ``read-only`` or ``read-write``.

A request without valid credentials gets 401 (error code 401, with a ``WWW-Authenticate``
challenge); a read-only principal asking to change something gets 403 (error code 40301,
as Confluent's authorizer). Lookups (``POST /subjects/{subject}``) and compatibility tests
only read, so read-only principals may make them, as in Confluent's role model.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ROLES", "Authenticator", "Role"]

Role = Literal["read-only", "read-write"]
ROLES: tuple[Role, ...] = ("read-only", "read-write")
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _role(value: Any, where: str) -> Role:
    if value not in ROLES:
        raise ValueError(f"{where}: role must be one of {', '.join(ROLES)}, got {value!r}")
    return value  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Authenticator:
    """Who may use the registry, and how.

    Args:
        users: user name -> ``(password, role)`` for HTTP basic authentication.
        tokens: bearer token -> role.

    Raises:
        ValueError: an unknown role, an empty password or token, or no principal at all.
    """

    users: Mapping[str, tuple[str, Role]] = field(default_factory=dict)
    tokens: Mapping[str, Role] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.users and not self.tokens:
            raise ValueError("authentication needs at least one user or token")
        for name, (password, role) in self.users.items():
            if not name or ":" in name or not password:
                raise ValueError(f"user {name!r}: needs a name without ':' and a password")
            _role(role, f"user {name!r}")
        for token, role in self.tokens.items():
            if not token:
                raise ValueError("empty bearer token")
            _role(role, "token")

    def __repr__(self) -> str:  # secrets never appear in repr or logs
        return f"Authenticator(users={sorted(self.users)}, tokens={len(self.tokens)})"

    @classmethod
    def from_file(cls, path: str) -> Authenticator:
        """Read ``{"users": {name: {"password": ..., "role": ...}}, "tokens": {token: role}}``.

        Raises:
            ValueError: the file is not such a document (see the class).
            OSError: it cannot be read.
        """
        with open(path, encoding="utf-8") as fh:
            try:
                data = json.load(fh)
                users = {str(n): (str(u["password"]), _role(u["role"], f"user {n!r}"))
                         for n, u in (data.get("users") or {}).items()}
                tokens = {str(t): _role(r, "token") for t, r in (data.get("tokens") or {}).items()}
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(f"{path}: not a registry auth file: {exc}") from None
        return cls(users, tokens)

    def _principal_role(self, authorization: str | None) -> Role | None:
        scheme, _, value = (authorization or "").strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "basic":
            try:
                name, sep, password = base64.b64decode(value, validate=True).decode(
                    "utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return None
            known = self.users.get(name)
            # compare_digest: the answer time must not tell how much of a password matched.
            if sep and known is not None and hmac.compare_digest(
                    known[0].encode(), password.encode()):
                return known[1]
            return None
        if scheme.lower() == "bearer":
            for token, role in self.tokens.items():
                if hmac.compare_digest(token.encode(), value.encode()):
                    return role
        return None

    def check(self, method: str, path: str, headers: Mapping[str, str]
              ) -> tuple[int, dict[str, Any]] | None:
        """None when the request may proceed, else ``(status, error body)``."""
        role = self._principal_role(headers.get("authorization"))
        if role is None:
            return 401, {"error_code": 401, "message": "Unauthorized: valid basic or bearer "
                         "credentials are required"}
        if role == "read-write" or _reads_only(method, path):
            return None
        return 403, {"error_code": 40301, "message": f"User is denied operation {method} "
                     f"on {path}: the role is read-only"}


def _reads_only(method: str, path: str) -> bool:
    if method.upper() in _READ_METHODS:
        return True
    if method.upper() != "POST":
        return False
    parts = path.strip("/").split("/")
    # POST /subjects/{s} looks a schema up; POST /compatibility/... tests one.
    return (len(parts) == 2 and parts[0] == "subjects") or parts[0] == "compatibility"
