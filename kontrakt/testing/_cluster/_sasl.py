"""SASL on the cluster's listeners: SaslHandshake v1 and SaslAuthenticate carrying PLAIN or
SCRAM-SHA-256 / SCRAM-SHA-512 (the server side of RFC 5802 / RFC 7677), written from the
RFCs, sans-I/O: :class:`SaslSession` takes each client token and returns the answer."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["MECHANISMS", "SaslFailure", "SaslSession", "ScramCredential"]

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
        name = _HASHES[mechanism]
        salt = salt if salt is not None else os.urandom(16)
        salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", name).digest()
        return cls(salt, iterations, hashlib.new(name, client_key).digest(),
                   hmac.new(salted, b"Server Key", name).digest())


def _attrs(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslFailure(f"malformed SCRAM attribute {part!r}")
        out[part[0]] = part[2:]
    return out


def _unescape(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


class SaslSession:
    """One connection's authentication: the mechanism chosen, then the token exchange.

    Args:
        mechanism: the mechanism from SaslHandshake (one of :data:`MECHANISMS`).
        users: user name -> password.
        credentials: (mechanism, user) -> SCRAM credential, computed once per cluster.
    """

    def __init__(self, mechanism: str, users: Mapping[str, str],
                 credentials: dict[tuple[str, str], ScramCredential]) -> None:
        self.mechanism = mechanism
        self.users = users
        self.credentials = credentials
        self.user: str | None = None
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
        password = self.users.get(user)
        if password is None:
            raise SaslFailure("Authentication failed during authentication due to invalid "
                              "credentials with SASL mechanism " + self.mechanism)
        key = (self.mechanism, user)
        cred = self.credentials.get(key)
        if cred is None:
            cred = self.credentials[key] = ScramCredential.make(self.mechanism, password)
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
