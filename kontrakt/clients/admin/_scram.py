"""SCRAM credential administration (KIP-554) — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`, with confluent-kafka's names.

The password never crosses the wire: the client salts it as Kafka's admin client does (a
random salt, then SaltedPassword = PBKDF2-HMAC(password, salt, iterations), RFC 5802's
``Hi``) and sends the salt, the iteration count and the salted password. Both requests go to
any broker (the least loaded), which forwards alterations to the controller.
"""

from __future__ import annotations

import enum
import hashlib
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kontrakt.clients.admin._routing import Router, error_for, finish
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.errors import InvalidArgumentError, ProtocolError
from kontrakt.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)

__all__ = [
    "ScramCredentialInfo",
    "ScramMechanism",
    "ScramOperations",
    "UserScramCredentialAlteration",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
    "salted_password",
]

#: Kafka's bounds for SCRAM-SHA-256/512 iteration counts (brokers refuse others)
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramMechanism(enum.IntEnum):
    """A SCRAM mechanism as numbered in the protocol."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def hash_name(self) -> str:
        """hashlib's name of the mechanism's hash."""
        if self is ScramMechanism.UNKNOWN:
            raise InvalidArgumentError("ScramMechanism.UNKNOWN has no hash")
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    """A mechanism and its iteration count."""

    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True, slots=True)
class UserScramCredentialsDescription:
    """A user's SCRAM credentials (never the salt or the salted password)."""

    user: str
    scram_credential_infos: list[ScramCredentialInfo]


@dataclass(frozen=True, slots=True)
class UserScramCredentialAlteration:
    """Base of :class:`UserScramCredentialUpsertion` and :class:`UserScramCredentialDeletion`."""

    user: str


@dataclass(frozen=True, slots=True)
class UserScramCredentialUpsertion(UserScramCredentialAlteration):
    """Create or replace the user's credential for one mechanism.

    Args:
        password: UTF-8 text or bytes; never shown in repr.
        salt: random (as Kafka's admin client makes it) when None.
    """

    scram_credential_info: ScramCredentialInfo
    password: bytes | str = field(repr=False)
    salt: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class UserScramCredentialDeletion(UserScramCredentialAlteration):
    """Delete the user's credential for one mechanism."""

    mechanism: ScramMechanism


def salted_password(mechanism: ScramMechanism, password: bytes | str, salt: bytes,
                    iterations: int) -> bytes:
    """RFC 5802's SaltedPassword, ``Hi(password, salt, i)``: PBKDF2 with HMAC of the
    mechanism's hash, one hash-length block (what Kafka's ScramFormatter computes)."""
    raw = password.encode() if isinstance(password, str) else password
    return hashlib.pbkdf2_hmac(mechanism.hash_name, raw, salt, iterations)


def _random_salt() -> bytes:
    # Kafka's admin client: a 130-bit random number written in base 36, as UTF-8 bytes.
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return (out or "0").encode()


def _check(alterations: list[UserScramCredentialAlteration]) -> None:
    seen: set[tuple[str, ScramMechanism]] = set()
    for a in alterations:
        if isinstance(a, UserScramCredentialUpsertion):
            info = a.scram_credential_info
            mech = info.mechanism
            if not isinstance(a.password, (bytes, str)) or not a.password:
                raise InvalidArgumentError(f"the upsertion for user {a.user!r} needs a "
                                           "non-empty password (str or bytes)")
            if not MIN_ITERATIONS <= info.iterations <= MAX_ITERATIONS:
                raise InvalidArgumentError(
                    f"iterations for user {a.user!r} must be {MIN_ITERATIONS}.."
                    f"{MAX_ITERATIONS} (Kafka refuses others), got {info.iterations}")
            if a.salt is not None and (not isinstance(a.salt, bytes) or not a.salt):
                raise InvalidArgumentError(f"the salt for user {a.user!r} must be non-empty "
                                           "bytes (or None for a random one)")
        elif isinstance(a, UserScramCredentialDeletion):
            mech = a.mechanism
        else:
            raise InvalidArgumentError(
                f"expected UserScramCredentialUpsertion or UserScramCredentialDeletion, "
                f"got {a!r}")
        if not isinstance(a.user, str) or not a.user:
            raise InvalidArgumentError(f"{a!r}: the user must be a non-empty string")
        if not isinstance(mech, ScramMechanism) or mech is ScramMechanism.UNKNOWN:
            raise InvalidArgumentError(f"{a!r}: the mechanism must be SCRAM_SHA_256 or "
                                       "SCRAM_SHA_512")
        if (a.user, mech) in seen:
            raise InvalidArgumentError(f"user {a.user!r} is altered twice for {mech.name}")
        seen.add((a.user, mech))


class ScramOperations:
    """SCRAM credential operations (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    async def describe_user_scram_credentials(
            self, users: Iterable[str] | None = None, *, timeout: float | None = None,
            return_exceptions: bool = False) -> dict[str, UserScramCredentialsDescription]:
        """The SCRAM mechanisms and iteration counts of ``users`` (default: every user
        with a credential).

        Returns:
            user -> :class:`UserScramCredentialsDescription`.

        Raises:
            InvalidArgumentError: a user is not a non-empty string or is named twice.
            ResourceNotFoundError: the only user asked about has no credential (several:
                PartialFailureError, or the errors in the dict with ``return_exceptions``).
            BrokerResponseError: the whole request failed (e.g. not authorized).
            KafkaTimeoutError: no answer within ``timeout`` (default
                ``default.api.timeout.ms``), retries included.
        """
        names = None if users is None else list(users)
        if names is not None and (any(not isinstance(u, str) or not u for u in names)
                                  or len(set(names)) != len(names)):
            raise InvalidArgumentError(f"users must be distinct non-empty strings: {names!r}")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DescribeUserScramCredentialsRequest

        async def attempt() -> dict[str, Any]:
            resp = await self._router.exchange(
                self._client.least_loaded_node(), req, lambda ver: req(
                    users=None if names is None else [req.UserName(name=u) for u in names]),
                deadline)
            if resp.error_code:
                raise error_for(resp.error_code, resp.error_message,
                                "describe_user_scram_credentials")
            out: dict[str, Any] = {}
            for r in resp.results:
                out[r.user] = error_for(r.error_code, r.error_message, f"user {r.user!r}") \
                    if r.error_code else UserScramCredentialsDescription(r.user, [
                        ScramCredentialInfo(_mechanism(c.mechanism), c.iterations)
                        for c in r.credential_infos])
            return out

        results = await self._router.call(attempt, deadline)
        return finish(results, "describe_user_scram_credentials", return_exceptions)

    async def alter_user_scram_credentials(
            self, alterations: Iterable[UserScramCredentialAlteration], *,
            timeout: float | None = None, return_exceptions: bool = False) -> dict[str, None]:
        """Create, replace or delete users' SCRAM credentials, salted here (the password
        is not sent).

        Returns:
            user -> None for each user altered.

        Raises:
            InvalidArgumentError: an alteration of an unknown kind, an empty user or
                password, iterations outside 4096..16384, the UNKNOWN mechanism, or the same
                user and mechanism twice; nothing is sent.
            BrokerResponseError: the only user's alteration failed (e.g.
                ResourceNotFoundError for deleting a credential that does not exist,
                UnacceptableCredentialError); several users: PartialFailureError.
            KafkaTimeoutError: no answer within ``timeout``.
        """
        items = list(alterations)
        _check(items)
        upserts, deletes = [], []
        req = AlterUserScramCredentialsRequest
        for a in items:
            if isinstance(a, UserScramCredentialUpsertion):
                info = a.scram_credential_info
                salt = a.salt if a.salt is not None else _random_salt()
                upserts.append(req.ScramCredentialUpsertion(
                    name=a.user, mechanism=int(info.mechanism), iterations=info.iterations,
                    salt=salt, salted_password=salted_password(
                        info.mechanism, a.password, salt, info.iterations)))
            else:
                assert isinstance(a, UserScramCredentialDeletion)
                deletes.append(req.ScramCredentialDeletion(name=a.user,
                                                           mechanism=int(a.mechanism)))
        users = list(dict.fromkeys(a.user for a in items))
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def attempt() -> Mapping[str, Any]:
            resp = await self._router.exchange(
                self._client.least_loaded_node(), req,
                lambda ver: req(deletions=deletes, upsertions=upserts), deadline)
            out: dict[str, Any] = {}
            for r in resp.results:
                out[r.user] = error_for(r.error_code, r.error_message, f"user {r.user!r}") \
                    if r.error_code else None
            missing = [u for u in users if u not in out]
            if missing:
                raise ProtocolError(f"alter_user_scram_credentials: no result for {missing}")
            return out

        # Only an attempt that got no answer is repeated (an upsertion or deletion sent
        # twice ends the same); per-user errors are final.
        results = await self._router.call(attempt, deadline)
        return finish(results, "alter_user_scram_credentials", return_exceptions)


def _mechanism(value: int) -> ScramMechanism:
    try:
        return ScramMechanism(value)
    except ValueError:
        return ScramMechanism.UNKNOWN
