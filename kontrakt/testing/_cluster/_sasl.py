"""SASL on the cluster's listeners: SaslHandshake v1 and SaslAuthenticate carrying PLAIN or
SCRAM-SHA-256 / SCRAM-SHA-512 (the server side of RFC 5802 / RFC 7677), written from the
RFCs, sans-I/O: :class:`SaslSession` takes each client token and returns the answer."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponse,
)
from kontrakt.protocol.spec import Response

__all__ = ["MECHANISMS", "SaslFailure", "SaslSession", "ScramAdmin", "ScramCredential"]

MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_ITERATIONS: Final = 4096


class SaslFailure(Exception):
    """The client failed to authenticate (bad credentials or a malformed token)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a broker stores for a SCRAM user: salt, iterations, StoredKey and ServerKey."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def make(cls, mechanism: str, password: str, iterations: int = _ITERATIONS,
             salt: bytes | None = None) -> ScramCredential:
        """The credential for a password (a random salt unless given)."""
        salt = salt if salt is not None else os.urandom(16)
        salted = hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)
        return cls.from_salted(mechanism, salt, iterations, salted)

    @classmethod
    def from_salted(cls, mechanism: str, salt: bytes, iterations: int,
                    salted: bytes) -> ScramCredential:
        """The credential for a salted password (what AlterUserScramCredentials sends)."""
        name = _HASHES[mechanism]
        client_key = hmac.new(salted, b"Client Key", name).digest()
        return cls(salt, iterations, hashlib.new(name, client_key).digest(),
                   hmac.new(salted, b"Server Key", name).digest())


def _attrs(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        # one-letter attributes, and extensions (RFC 7677 / KIP-84) such as tokenauth=true
        key, sep, value = part.partition("=")
        if not key or not sep:
            raise SaslFailure(f"malformed SCRAM attribute {part!r}")
        out[key] = value
    return out


def _unescape(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


class SaslSession:
    """One connection's authentication: the mechanism chosen, then the token exchange.

    Args:
        mechanism: the mechanism from SaslHandshake (one of :data:`MECHANISMS`).
        users: user name -> password.
        credentials: (mechanism, user) -> SCRAM credential, computed once per cluster.
        tokens: (mechanism, token id) -> the delegation token's credential and owner, for
            a SCRAM login with the ``tokenauth=true`` extension.
    """

    def __init__(self, mechanism: str, users: Mapping[str, str],
                 credentials: dict[tuple[str, str], ScramCredential],
                 tokens: Callable[[str, str], tuple[ScramCredential, str] | None] | None = None
                 ) -> None:
        self.mechanism = mechanism
        self.users = users
        self.credentials = credentials
        self.tokens = tokens
        self.user: str | None = None
        #: the principal a token login acts as (its owner), else None
        self.token_owner: str | None = None
        self.done = False
        self._scram: tuple[str, str, str, ScramCredential] | None = None

    def step(self, token: bytes) -> bytes:
        """Answer one client token.

        Raises:
            SaslFailure: authentication failed; the connection must be closed.
        """
        if self.mechanism == "PLAIN":
            return self._plain(token)
        if self._scram is None:
            return self._scram_first(token)
        return self._scram_final(token)

    def _plain(self, token: bytes) -> bytes:
        try:
            _authzid, user, password = token.decode().split("\0")
        except ValueError:
            raise SaslFailure("malformed PLAIN token") from None
        expected = self.users.get(user)
        if expected is None or not hmac.compare_digest(expected, password):
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.user, self.done = user, True
        return b""

    def _scram_first(self, token: bytes) -> bytes:
        text = token.decode(errors="replace")
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or (parts[1] and \
                not parts[1].startswith("a=")):
            raise SaslFailure("malformed SCRAM client-first message")
        bare = parts[2]
        attrs = _attrs(bare)
        user = _unescape(attrs.get("n", ""))
        nonce = attrs.get("r", "")
        if not nonce:
            raise SaslFailure("SCRAM client-first message without a nonce")
        if attrs.get("tokenauth", "false").lower() == "true":
            found = self.tokens(self.mechanism, user) if self.tokens is not None else None
            cred, self.token_owner = found if found is not None else (None, None)
        else:
            cred = self.credentials.get((self.mechanism, user))
        if cred is None:
            raise SaslFailure("Authentication failed during authentication due to invalid "
                              "credentials with SASL mechanism " + self.mechanism)
        server_first = (f"r={nonce}{base64.b64encode(os.urandom(18)).decode()},"
                        f"s={base64.b64encode(cred.salt).decode()},i={cred.iterations}")
        self._scram = (f"{parts[0]},{parts[1]},", bare, server_first, cred)
        self.user = user
        return server_first.encode()

    def _scram_final(self, token: bytes) -> bytes:
        assert self._scram is not None
        gs2, client_first_bare, server_first, cred = self._scram
        name = _HASHES[self.mechanism]
        text = token.decode(errors="replace")
        without_proof, _, proof_part = text.rpartition(",p=")
        attrs = _attrs(without_proof)
        server_nonce = _attrs(server_first)["r"]
        if attrs.get("r") != server_nonce:
            raise SaslFailure("SCRAM nonce mismatch")
        if base64.b64decode(attrs.get("c", "")) != gs2.encode():
            raise SaslFailure("SCRAM channel binding mismatch")
        auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(cred.stored_key, auth_message, name).digest()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise SaslFailure("malformed SCRAM proof") from None
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=False))
        if len(proof) != len(signature) or not hmac.compare_digest(
                hashlib.new(name, client_key).digest(), cred.stored_key):
            raise SaslFailure("Authentication failed during authentication due to invalid "
                              "credentials with SASL mechanism " + self.mechanism)
        self.done = True
        server_signature = hmac.new(cred.server_key, auth_message, name).digest()
        return b"v=" + base64.b64encode(server_signature)


#: KIP-554's mechanism numbers.
_MECHANISM_IDS: Final = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_MIN_ITERATIONS, _MAX_ITERATIONS = 4096, 16384


class ScramAdmin:
    """DescribeUserScramCredentials and AlterUserScramCredentials over the cluster's SCRAM
    credentials (which SCRAM authentication uses)."""

    def __init__(self, credentials: dict[tuple[str, str], ScramCredential]) -> None:
        self.credentials = credentials

    def describe(self, ctx: Any, version: int, req: Any) -> Response:
        dr = DescribeUserScramCredentialsResponse
        users = sorted({u for _m, u in self.credentials}) if not req.users else \
            [u.name for u in req.users]
        results = []
        for user in users:
            infos = [dr.DescribeUserScramCredentialsResult.CredentialInfo(
                mechanism=mid, iterations=self.credentials[(mech, user)].iterations)
                for mid, mech in sorted(_MECHANISM_IDS.items())
                if (mech, user) in self.credentials]
            error, message = 0, None
            if users.count(user) > 1:
                error, message = E.DuplicateResourceError.code, f"Duplicate user {user}"
            elif not infos:
                error, message = (E.ResourceNotFoundError.code,
                                  f"Attempt to describe a user credential that does not "
                                  f"exist: {user}")
            results.append(dr.DescribeUserScramCredentialsResult(
                user=user, error_code=error, error_message=message,
                credential_infos=[] if error else infos))
        return dr(error_code=0, results=results)

    def alter(self, ctx: Any, version: int, req: Any) -> Response:
        ar = AlterUserScramCredentialsResponse
        changes = [(d.name, d.mechanism, None) for d in req.deletions] + \
            [(u.name, u.mechanism, u) for u in req.upsertions]
        seen: dict[tuple[str, int], int] = {}
        for name, mid, _u in changes:
            seen[(name, mid)] = seen.get((name, mid), 0) + 1
        errors: dict[str, tuple[int, str]] = {}
        for name, mid, upsert in changes:
            mech = _MECHANISM_IDS.get(mid)
            if name in errors:
                continue
            if not name:
                errors[name] = (E.UnacceptableCredentialError.code, "Username must not be empty")
            elif mech is None:
                errors[name] = (E.UnsupportedSaslMechanismError.code,
                                f"Unknown SCRAM mechanism {mid}")
            elif seen[(name, mid)] > 1:
                errors[name] = (E.DuplicateResourceError.code,
                                f"A user credential cannot be altered twice in the same "
                                f"request: {name}")
            elif upsert is None and (mech, name) not in self.credentials:
                errors[name] = (E.ResourceNotFoundError.code,
                                f"Attempt to delete a user credential that does not exist: "
                                f"{name}")
            elif upsert is not None and not (
                    _MIN_ITERATIONS <= upsert.iterations <= _MAX_ITERATIONS):
                errors[name] = (E.UnacceptableCredentialError.code,
                                f"Iterations must be within {_MIN_ITERATIONS}.."
                                f"{_MAX_ITERATIONS}")
        for name, mid, upsert in changes:
            mech = _MECHANISM_IDS.get(mid)
            if name in errors or mech is None:
                continue
            if upsert is None:
                self.credentials.pop((mech, name), None)
            else:
                self.credentials[(mech, name)] = ScramCredential.from_salted(
                    mech, bytes(upsert.salt), upsert.iterations, bytes(upsert.salted_password))
        return ar(results=[ar.AlterUserScramCredentialsResult(
            user=name, error_code=errors.get(name, (0, None))[0],
            error_message=errors.get(name, (0, None))[1])
            for name in dict.fromkeys(n for n, _m, _u in changes)])
